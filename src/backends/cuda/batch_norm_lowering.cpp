// Inference batch_norm on CUDA (conv_kernels.cu): one elementwise pass over a
// contiguous input with the channel on axis 1, parameters of any floating
// dtype read in the compute type. Batch norms after a convolution are usually
// folded into it (passes/fold_batch_norm.cpp); this serves the rest.
//
// A strided input (a channels-last view, e.g. torchvision's MaxViT normalizing
// a permuted tensor) is first copied into the output, which is contiguous and
// of the input's dtype and dims, and then normalized there in place: the
// kernel reads and writes each element from the same thread. That costs one
// copy but no scratch memory, no graph rewrite and no new kernel.
#include "backends/cuda/conv_kernels.h"
#include "backends/cuda/cuda_common.h"
#include "backends/cuda/kernel_registry.h"
#include "support/error.h"

namespace kiln::cuda {

namespace {

class BatchNormKernel final : public CudaKernel {
 public:
  BatchNormKernel(const Node& node, int device, BatchNormArgs args) : CudaKernel(node, device), args_(args) {}

 protected:
  void launch(std::span<const TensorView> in, std::span<const TensorView> out, cudaStream_t s) const override {
    BatchNormArgs a = args_;
    a.x = in[0].data;
    a.y = out[0].data;
    if (!in[0].type().is_contiguous()) {
      check_launch(launch_copy(copy_args(in[0].dims, in[0].data, in[0].strides, out[0].data, out[0].strides,
                                         dtype_size(in[0].dtype)),
                               s));
      a.x = out[0].data;
    }
    a.mean = in[1].data;
    a.var = in[2].data;
    a.weight = in.size() > 3 ? in[3].data : nullptr;
    a.bias = in.size() > 4 ? in[4].data : nullptr;
    check_launch(launch_batch_norm(a, s));
  }

 private:
  BatchNormArgs args_;
};

std::unique_ptr<BackendKernel> make_batch_norm(const Node& node, const LowerContext& ctx, std::string* reason) {
  const TensorType& x = node.inputs[0]->type;
  if (!x.is_contiguous() && !fits_rank(node, reason)) return nullptr;  // the copy's index space
  BatchNormArgs a;
  a.dtype = static_cast<int>(x.dtype);
  a.n = numel(x.dims);
  a.channels = x.dims[1];
  a.inner = 1;
  for (size_t d = 2; d < x.rank(); ++d) a.inner *= x.dims[d];
  for (size_t i = 1; i < node.inputs.size(); ++i) {
    a.param_dtype[i - 1] = static_cast<int>(node.inputs[i]->type.dtype);
    a.param_stride[i - 1] = node.inputs[i]->type.strides[0];
  }
  a.eps = node.attrs.get_float("eps");
  return std::make_unique<BatchNormKernel>(node, ctx.device, a);
}

}  // namespace

void register_batch_norm_kernels(KernelMap& map) { map["batch_norm"] = &make_batch_norm; }

}  // namespace kiln::cuda
