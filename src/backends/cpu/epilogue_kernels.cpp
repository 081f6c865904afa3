// CPU kernels of the ops that passes create (ops/epilogue_ops.cpp): each runs
// the plain op's kernel and then its epilogue, with the same roundings as the
// unfused graph (the product is stored in the output dtype, then the bias and
// activation are applied in the compute type), so the CPU results of a graph
// do not change when a pass fuses it.
//   matmul_epilogue  matmul, then + bias over the last dim, then the activation,
//                    or (activation none) + the residual, rounded after the
//                    bias and again after the residual as the two unfused adds
//   conv2d_fused     conv2d (bias included), then + the residual (rounded as
//                    the unfused add), then ReLU (its channels_last form goes
//                    through channels_last_kernels.cpp)
#include <algorithm>
#include <vector>

#include "backends/cpu/dtype_dispatch.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/strided_loop.h"
#include "ir/tensor_type.h"
#include "ops/op_def.h"
#include "ops/scalar_math.h"
#include "support/error.h"

namespace kiln::cpu::internal {

namespace {

enum class Act { none, relu, gelu, gelu_tanh };

Act parse_act(const std::string& s) {
  return s == "relu" ? Act::relu : s == "gelu" ? Act::gelu : s == "gelu_tanh" ? Act::gelu_tanh : Act::none;
}

class EpilogueKernel final : public CpuKernel {
 public:
  EpilogueKernel(std::unique_ptr<CpuKernel> base, const Node& node) : base_(std::move(base)) {
    conv_ = node.op->name == "conv2d_fused";
    if (conv_) {
      act_ = node.attrs.get_bool("relu") ? Act::relu : Act::none;
      residual_ = node.inputs.size() > 3;
    } else {
      act_ = parse_act(node.attrs.get_string("activation"));
      bias_ = node.inputs.size() > 2;
      residual_ = node.inputs.size() > 3;
    }
  }

  void run(std::span<const TensorView> in, std::span<const TensorView> out, const CpuContext& ctx) const override {
    const TensorView& y = out[0];
    if (!conv_) {
      base_->run(in.first(2), out, ctx);
      dispatch_floating(y.dtype, "matmul_epilogue", [&]<typename T>() {
        finish<T>(y, bias_ ? &in[2] : nullptr, residual_ ? &in[3] : nullptr, ctx);
      });
      return;
    }
    base_->run(in.first(std::min<size_t>(in.size(), 3)), out, ctx);  // x, weight, bias
    dispatch_floating(y.dtype, "conv2d_fused",
                      [&]<typename T>() { finish<T>(y, nullptr, residual_ ? &in[3] : nullptr, ctx); });
  }

 private:
  // y = act(y + bias + residual) in place, rounded after each add as the
  // unfused graph (bias over the last dim, residual strided; a matmul's residual
  // comes only with activation none); y contiguous.
  template <typename T>
  void finish(const TensorView& y, const TensorView* bias, const TensorView* residual, const CpuContext& ctx) const {
    if (act_ == Act::none && bias == nullptr && residual == nullptr) return;
    T* d = static_cast<T*>(y.data);
    const int64_t last = y.dims.empty() ? 1 : y.dims.back();
    // A residual laid out as y (a convolution's or a linear layer's skip connection) is read by row too.
    const T* res = residual != nullptr && residual->dims == y.dims && is_contiguous(residual->dims, residual->strides)
                       ? static_cast<const T*>(residual->data)
                       : nullptr;
    if (residual == nullptr || res != nullptr) {
      // Runs of y, each step one loop over the run (they vectorize: no index arithmetic or switch per
      // element): whole rows with a bias (it follows the last dim), else even chunks of the flat tensor.
      const T* b = bias != nullptr ? static_cast<const T*>(bias->data) : nullptr;
      const int64_t b_stride = bias != nullptr ? bias->strides[0] : 0;
      if (b == nullptr) {
        ctx.pool.parallel_for(y.numel(), 16384, [&](int64_t i0, int64_t i1) {
          finish_run<T>(d + i0, res != nullptr ? res + i0 : nullptr, i1 - i0, nullptr, 0);
        });
        return;
      }
      const int64_t rows = last == 0 ? 0 : y.numel() / last;
      ctx.pool.parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(last, 1)), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          finish_run(d + r * last, res != nullptr ? res + r * last : nullptr, last, b, b_stride);
      });
      return;
    }
    auto biased = [&](int64_t i) {
      auto v = to_compute(d[i]);
      if (bias != nullptr) {
        v += to_compute(static_cast<const T*>(bias->data)[(i % last) * bias->strides[0]]);
        v = to_compute(from_compute<T>(v));  // the unfused add rounds here
      }
      return v;
    };
    ctx.pool.parallel_for(y.numel(), 16384, [&](int64_t i0, int64_t i1) {
      // y's flat index walks the residual's strides in the same (row-major) order.
      const T* r = static_cast<const T*>(residual->data);
      int64_t i = i0;
      for_each_offset<1>(y.dims, {&residual->strides}, i0, i1, [&](const std::array<int64_t, 1>& o) {
        d[i] = from_compute<T>(biased(i) + to_compute(r[o[0]]));  // the unfused add rounds
        ++i;
      });
      activate(d + i0, i1 - i0);
    });
  }

  // x = act(x + bias + r) over n contiguous values (bias and r optional, each add rounded to T), one loop a step.
  template <typename T>
  void finish_run(T* x, const T* r, int64_t n, const T* bias, int64_t bias_stride) const {
    if (bias != nullptr)
      for (int64_t j = 0; j < n; ++j) x[j] = from_compute<T>(to_compute(x[j]) + to_compute(bias[j * bias_stride]));
    if (r != nullptr)
      for (int64_t j = 0; j < n; ++j) x[j] = from_compute<T>(to_compute(x[j]) + to_compute(r[j]));
    activate(x, n);
  }

  // x = act(x) over n contiguous values, one loop per activation.
  template <typename T>
  void activate(T* x, int64_t n) const {
    auto each = [&](auto f) {
      for (int64_t j = 0; j < n; ++j) x[j] = from_compute<T>(f(to_compute(x[j])));
    };
    switch (act_) {
      case Act::relu: each([](auto v) { return sm::k_relu(v); }); break;
      case Act::gelu: each([](auto v) { return sm::k_gelu(v); }); break;
      case Act::gelu_tanh: each([](auto v) { return sm::k_gelu_tanh(v); }); break;
      case Act::none: break;
    }
  }

  std::unique_ptr<CpuKernel> base_;
  bool conv_ = false, bias_ = false, residual_ = false;
  Act act_ = Act::none;
};

}  // namespace

std::unique_ptr<CpuKernel> with_epilogue(std::unique_ptr<CpuKernel> base, const Node& node, std::string* reason) {
  if (!base) return nullptr;
  if (!is_floating(node.outputs[0]->type.dtype)) {
    if (reason) *reason = node.op->name + " needs a floating-point result";
    return nullptr;
  }
  return std::make_unique<EpilogueKernel>(std::move(base), node);
}

}  // namespace kiln::cpu::internal
