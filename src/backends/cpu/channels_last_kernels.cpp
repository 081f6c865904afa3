// The CPU side of the layout pass (passes/choose_layout.cpp): an op with
// channels_last=true has N, H, W, C tensors (a conv weight O, kH, kW, C/g)
// where the plain op has N, C, H, W: every input of rank 3 or 4 (x, a conv
// weight, a conv's residual; not a bias). The CPU kernels read any strides, so the
// adapter hands the plain kernel strided NCHW views of the NHWC inputs, lets
// it write contiguous NCHW results into scratch, and copies those into the
// NHWC outputs. Correct, not fast: choose_layout only runs for CUDA graphs,
// and this keeps the CPU reference able to run every graph kiln makes.
#include <cstring>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "ops/op_def.h"
#include "support/error.h"

namespace kiln::cpu::internal {

namespace {

// The permutation from NHWC (HWC) positions to NCHW (CHW) ones.
std::vector<size_t> nchw_order(size_t rank) {
  return rank == 4 ? std::vector<size_t>{0, 3, 1, 2} : std::vector<size_t>{2, 0, 1};
}

TensorView nchw_view(const TensorView& v) {
  TensorView r = v;
  const auto order = nchw_order(v.dims.size());
  for (size_t i = 0; i < order.size(); ++i) {
    r.dims[i] = v.dims[order[i]];
    r.strides[i] = v.strides[order[i]];
  }
  return r;
}

class ChannelsLastKernel final : public CpuKernel {
 public:
  explicit ChannelsLastKernel(std::unique_ptr<CpuKernel> base) : base_(std::move(base)) {}

  void run(std::span<const TensorView> in, std::span<const TensorView> out, const CpuContext& ctx) const override {
    std::vector<TensorView> ins(in.begin(), in.end());
    for (TensorView& v : ins)
      if (v.dims.size() == 3 || v.dims.size() == 4) v = nchw_view(v);
    std::vector<std::vector<uint64_t>> scratch(out.size());
    std::vector<TensorView> tmp;
    for (size_t i = 0; i < out.size(); ++i) {
      const TensorView logical = nchw_view(out[i]);
      scratch[i].resize((static_cast<size_t>(out[i].numel()) * dtype_size(out[i].dtype) + 7) / 8);
      tmp.emplace_back(scratch[i].data(), TensorType(out[i].dtype, logical.dims), out[i].device);
    }
    base_->run(ins, tmp, ctx);
    for (size_t i = 0; i < out.size(); ++i) to_channels_last(tmp[i], out[i]);
  }

 private:
  // Copies contiguous NCHW `src` into contiguous NHWC `dst`.
  static void to_channels_last(const TensorView& src, const TensorView& dst) {
    const size_t es = dtype_size(src.dtype);
    const bool batched = src.dims.size() == 4;
    const int64_t n = batched ? src.dims[0] : 1, c = src.dims[batched ? 1 : 0];
    const int64_t hw = n * c == 0 ? 0 : src.numel() / (n * c);
    const auto* s = static_cast<const uint8_t*>(src.data);
    auto* d = static_cast<uint8_t*>(dst.data);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t p = 0; p < hw; ++p)
          std::memcpy(d + static_cast<size_t>((b * hw + p) * c + ch) * es,
                      s + static_cast<size_t>((b * c + ch) * hw + p) * es, es);
  }

  std::unique_ptr<CpuKernel> base_;
};

}  // namespace

std::unique_ptr<CpuKernel> with_channels_last(std::unique_ptr<CpuKernel> base, const Node& node) {
  if (!base || node.op->attr_spec("channels_last") == nullptr || !node.attrs.get_bool("channels_last")) return base;
  return std::make_unique<ChannelsLastKernel>(std::move(base));
}

}  // namespace kiln::cpu::internal
