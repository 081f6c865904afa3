// max_pool2d, avg_pool2d and adaptive_avg_pool2d on CUDA (pool_kernels.cu)
// for f32, f64, f16 and bf16. The input is read through its strides; an op
// with channels_last (the layout pass's NHWC chains) has N, H, W, C dims in the
// IR and is described to the kernel by its logical N, C, H, W order, so the
// same kernel serves both layouts.
#include "backends/cuda/conv_kernels.h"
#include "backends/cuda/cuda_common.h"
#include "backends/cuda/kernel_registry.h"
#include "support/error.h"

namespace kiln::cuda {

namespace {

std::vector<int64_t> pair_or(const Attrs& attrs, std::string_view name, std::vector<int64_t> fallback) {
  const std::vector<int64_t>& v = attrs.get_ints(name);
  if (v.empty()) return fallback;
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
}

// Logical N, C, H, W dims and strides (rank 3 is batch 1).
void logical(const TensorType& t, bool channels_last, int64_t dims[4], int64_t strides[4]) {
  Dims d = t.dims, s = t.strides;
  if (d.size() == 3) {
    d.insert(d.begin(), 1);
    s.insert(s.begin(), 0);
  }
  const int order[4] = {0, channels_last ? 3 : 1, channels_last ? 1 : 2, channels_last ? 2 : 3};
  for (int i = 0; i < 4; ++i) {
    dims[i] = d[static_cast<size_t>(order[i])];
    strides[i] = s[static_cast<size_t>(order[i])];
  }
}

class PoolKernel final : public CudaKernel {
 public:
  PoolKernel(const Node& node, int device, PoolArgs args) : CudaKernel(node, device), args_(args) {}

 protected:
  void launch(std::span<const TensorView> in, std::span<const TensorView> out, cudaStream_t s) const override {
    PoolArgs a = args_;
    a.x = in[0].data;
    a.y = out[0].data;
    a.indices = out.size() > 1 ? out[1].data : nullptr;
    check_launch(launch_pool(a, s));
  }

 private:
  PoolArgs args_;
};

std::unique_ptr<BackendKernel> make_pool(const Node& node, const LowerContext& ctx, std::string* reason) {
  const TensorType& x = node.inputs[0]->type;
  if (!is_floating(x.dtype)) {
    *reason = str_cat(node.op->name, " of ", dtype_name(x.dtype), " is not supported on CUDA (floating dtypes are)");
    return nullptr;
  }
  const bool channels_last = node.op->attr_spec("channels_last") != nullptr && node.attrs.get_bool("channels_last");
  PoolArgs a;
  a.dtype = static_cast<int>(x.dtype);
  logical(x, channels_last, a.dims, a.x_strides);
  int64_t out_dims[4];
  logical(node.outputs[0]->type, channels_last, out_dims, a.out_strides);
  a.out_hw[0] = out_dims[2];
  a.out_hw[1] = out_dims[3];
  a.channels_inner = a.out_strides[1] == 1 && out_dims[1] > 1;
  const std::string& op = node.op->name;
  if (op == "adaptive_avg_pool2d") {
    a.kind = PoolKind::adaptive_avg;
  } else {
    auto kernel = pair_or(node.attrs, "kernel_size", {});
    auto stride = pair_or(node.attrs, "stride", kernel);
    auto padding = pair_or(node.attrs, "padding", {0, 0});
    auto dilation = op == "max_pool2d" ? pair_or(node.attrs, "dilation", {1, 1}) : std::vector<int64_t>{1, 1};
    for (int i = 0; i < 2; ++i) {
      a.kernel[i] = kernel[static_cast<size_t>(i)];
      a.stride[i] = stride[static_cast<size_t>(i)];
      a.padding[i] = padding[static_cast<size_t>(i)];
      a.dilation[i] = dilation[static_cast<size_t>(i)];
    }
    if (op == "max_pool2d") {
      a.kind = PoolKind::max;
    } else {
      a.kind = PoolKind::avg;
      a.count_include_pad = node.attrs.get_bool("count_include_pad");
      a.divisor_override = node.attrs.get_int("divisor_override");
    }
  }
  return std::make_unique<PoolKernel>(node, ctx.device, a);
}

}  // namespace

void register_pool_kernels(KernelMap& map) {
  map["max_pool2d"] = &make_pool;
  map["avg_pool2d"] = &make_pool;
  map["adaptive_avg_pool2d"] = &make_pool;
}

}  // namespace kiln::cuda
