// Lowering of cumsum (aten.cumsum: position ids, masks) to cumsum_kernels.cu:
// the summed axis is a RowSpace's one reduced dim, so strided inputs and
// outputs are read and written in place. Every dtype, like the CPU reference.
#include "backends/cuda/cuda_common.h"
#include "backends/cuda/kernel_registry.h"
#include "ops/broadcast.h"

namespace kiln::cuda {

namespace {

class CumsumKernel final : public CudaKernel {
 public:
  CumsumKernel(const Node& node, int device, std::vector<int64_t> axes)
      : CudaKernel(node, device), axes_(std::move(axes)) {}

 protected:
  void launch(std::span<const TensorView> in, std::span<const TensorView> out, cudaStream_t s) const override {
    CumsumArgs a;
    a.rows = row_space(in[0].dims, in[0].strides, out[0].strides, axes_);
    a.dtype = static_cast<int>(in[0].dtype);
    a.in = in[0].data;
    a.out = out[0].data;
    check_launch(launch_cumsum(a, s));
  }

 private:
  std::vector<int64_t> axes_;  // the summed axis; none for a 0-d input
};

std::unique_ptr<BackendKernel> make_cumsum(const Node& node, const LowerContext& ctx, std::string* reason) {
  if (!fits_rank(node, reason)) return nullptr;
  const int64_t rank = static_cast<int64_t>(node.inputs[0]->type.rank());
  std::vector<int64_t> axes;
  if (rank > 0) axes.push_back(normalize_axis(node.attrs.get_int("dim"), rank));
  return std::make_unique<CumsumKernel>(node, ctx.device, std::move(axes));
}

}  // namespace

void register_cumsum_kernels(KernelMap& map) { map["cumsum"] = &make_cumsum; }

}  // namespace kiln::cuda
