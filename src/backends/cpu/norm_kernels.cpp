// CPU reference kernels for the normalization ops: batch_norm (inference),
// layer_norm, softmax and log_softmax, over strided inputs of any floating
// dtype (f16/bf16 computed in float). Statistics accumulate in double; softmax
// subtracts the row maximum before exponentiating. Rows are split over the
// thread pool for large inputs.
#include <cmath>
#include <limits>

#include "backends/cpu/dtype_dispatch.h"
#include "backends/cpu/elementwise_loop.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/reduce_loop.h"
#include "ops/broadcast.h"
#include "ops/op_def.h"
#include "ops/scalar_math.h"

namespace kiln::cpu::internal {

namespace {

// A 1-D or N-d parameter view (any floating dtype, any strides) read into
// contiguous doubles in row-major order.
std::vector<double> read_param(const TensorView& v) {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(v.numel()));
  dispatch_dtype(v.dtype, [&]<typename S>() {
    const S* p = v.ptr<const S>();
    for_each_offset<1>(v.dims, {&v.strides}, 0, v.numel(), [&](const std::array<int64_t, 1>& o) {
      out.push_back(static_cast<double>(to_compute<S>(p[o[0]])));
    });
  });
  return out;
}

// Rows of a row-wise op: the input's and the (contiguous) output's layouts
// with the same reduced axes, so row r and element k match in both.
struct RowLayouts {
  ReduceLayout in, out;
  int64_t rows = 0;
};

RowLayouts row_layouts(const TensorView& in, const std::vector<int64_t>& axes) {
  RowLayouts r;
  r.in = make_reduce_layout(in.dims, in.strides, axes);
  r.out = make_reduce_layout(in.dims, contiguous_strides(in.dims), axes);
  r.rows = numel(r.in.kept_dims);
  return r;
}

// Calls fn(in_base, out_base, values, scratch) for each row in parallel,
// `values` holding the row's inputs in compute type C (row-major).
template <typename S, typename Fn>
void for_each_row(const TensorView& in, const RowLayouts& l, ThreadPool& pool, Fn&& fn) {
  using C = compute_t<S>;
  const S* src = in.ptr<const S>();
  auto body = [&](int64_t begin, int64_t end) {
    std::vector<C> values;
    std::vector<int64_t> scratch;
    for_each_offset<2>(l.in.kept_dims, {&l.in.kept_strides, &l.out.kept_strides}, begin, end,
                       [&](const std::array<int64_t, 2>& o) {
                         values.clear();
                         visit_reduced(l.in, o[0], scratch, [&](int64_t off) { values.push_back(to_compute<S>(src[off])); });
                         fn(o[1], values, scratch);
                       });
  };
  if (in.numel() <= kParallelThreshold || l.rows <= 1) {
    if (l.rows > 0) body(0, l.rows);
  } else {
    pool.parallel_for(l.rows, std::max<int64_t>(1, kParallelThreshold / 2 / std::max<int64_t>(l.in.red_count, 1)), body);
  }
}

// ---- softmax, log_softmax --------------------------------------------------

template <typename S, bool kLog>
class SoftmaxKernel final : public CpuKernel {
 public:
  explicit SoftmaxKernel(int64_t axis) : axis_(axis) {}
  void run(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
           const CpuContext& ctx) const override {
    using C = compute_t<S>;
    const TensorView& in = inputs[0];
    S* dst = outputs[0].ptr<S>();
    std::vector<int64_t> axes;
    if (in.dims.size() > 0) axes.push_back(axis_);
    RowLayouts l = row_layouts(in, axes);
    for_each_row<S>(in, l, ctx.pool, [&](int64_t out_base, std::vector<C>& v, std::vector<int64_t>& scratch) {
      C max = -std::numeric_limits<C>::infinity();
      for (C x : v) max = std::isnan(x) || x > max ? x : max;
      if (std::isinf(max)) max = 0;  // all -inf (or +inf): avoid inf - inf
      // softmax keeps e^(x - max) in v (one loop that vectorizes), then sums it in order in double.
      double sum = 0;
      if constexpr (kLog) {
        for (C x : v) sum += static_cast<double>(sm::k_exp(x - max));
      } else {
        for (C& x : v) x = sm::k_exp(x - max);
        for (C e : v) sum += static_cast<double>(e);
      }
      C log_sum = static_cast<C>(std::log(sum));
      size_t k = 0;
      visit_reduced(l.out, out_base, scratch, [&](int64_t off) {
        C y = kLog ? (v[k] - max) - log_sum : static_cast<C>(v[k] / sum);
        ++k;
        dst[off] = from_compute<S, C>(y);
      });
    });
  }

 private:
  int64_t axis_;
};

// ---- layer_norm -----------------------------------------------------------

template <typename S>
class LayerNormKernel final : public CpuKernel {
 public:
  LayerNormKernel(int64_t normalized_rank, double eps) : k_(normalized_rank), eps_(eps) {}
  void run(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
           const CpuContext& ctx) const override {
    using C = compute_t<S>;
    const TensorView& in = inputs[0];
    S* dst = outputs[0].ptr<S>();
    std::vector<double> weight = inputs.size() > 1 ? read_param(inputs[1]) : std::vector<double>{};
    std::vector<double> bias = inputs.size() > 2 ? read_param(inputs[2]) : std::vector<double>{};
    std::vector<int64_t> axes;
    for (int64_t a = static_cast<int64_t>(in.dims.size()) - k_; a < static_cast<int64_t>(in.dims.size()); ++a)
      axes.push_back(a);
    RowLayouts l = row_layouts(in, axes);
    for_each_row<S>(in, l, ctx.pool, [&](int64_t out_base, std::vector<C>& v, std::vector<int64_t>& scratch) {
      double mean = 0, var = 0;
      for (C x : v) mean += static_cast<double>(x);
      mean /= static_cast<double>(v.size());
      for (C x : v) var += (static_cast<double>(x) - mean) * (static_cast<double>(x) - mean);
      var /= static_cast<double>(v.size());
      double rstd = 1.0 / std::sqrt(var + eps_);
      size_t k = 0;
      visit_reduced(l.out, out_base, scratch, [&](int64_t off) {
        double y = (static_cast<double>(v[k]) - mean) * rstd;
        if (!weight.empty()) y *= weight[k];
        if (!bias.empty()) y += bias[k];
        ++k;
        dst[off] = from_compute<S, C>(static_cast<C>(y));
      });
    });
  }

 private:
  int64_t k_;
  double eps_;
};

// ---- batch_norm -------------------------------------------------------------

template <typename S>
class BatchNormKernel final : public CpuKernel {
 public:
  explicit BatchNormKernel(double eps) : eps_(eps) {}
  void run(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
           const CpuContext& ctx) const override {
    using C = compute_t<S>;
    const TensorView& in = inputs[0];
    const S* src = in.ptr<const S>();
    S* dst = outputs[0].ptr<S>();
    std::vector<double> mean = read_param(inputs[1]), var = read_param(inputs[2]);
    std::vector<double> weight = inputs.size() > 3 ? read_param(inputs[3]) : std::vector<double>{};
    std::vector<double> bias = inputs.size() > 4 ? read_param(inputs[4]) : std::vector<double>{};
    // y = x * scale[c] + shift[c]
    std::vector<C> scale(mean.size()), shift(mean.size());
    for (size_t c = 0; c < mean.size(); ++c) {
      double s = 1.0 / std::sqrt(var[c] + eps_);
      if (!weight.empty()) s *= weight[c];
      scale[c] = static_cast<C>(s);
      shift[c] = static_cast<C>((bias.empty() ? 0.0 : bias[c]) - mean[c] * s);
    }
    Dims out_strides = contiguous_strides(in.dims);
    Dims channel(in.dims.size(), 0);  // offset into scale/shift = the channel index
    channel[1] = 1;
    parallel_range(ctx.pool, in.numel(), [&](int64_t begin, int64_t end) {
      for_each_offset<3>(in.dims, {&in.strides, &out_strides, &channel}, begin, end,
                         [&](const std::array<int64_t, 3>& o) {
                           dst[o[1]] = from_compute<S, C>(to_compute<S>(src[o[0]]) * scale[o[2]] + shift[o[2]]);
                         });
    });
  }

 private:
  double eps_;
};

// ---- factories ----------------------------------------------------------------

template <template <typename> class K, typename... Args>
std::unique_ptr<CpuKernel> make_floating(const Node& node, std::string* reason, Args... args) {
  DType d = node.inputs[0]->type.dtype;
  if (!is_floating(d)) {
    *reason = str_cat("needs a floating-point input, got ", dtype_name(d));
    return nullptr;
  }
  return dispatch_dtype(d, [&]<typename S>() -> std::unique_ptr<CpuKernel> {
    if constexpr (is_float_storage<S>) {
      return std::make_unique<K<S>>(args...);
    } else {
      return nullptr;
    }
  });
}

template <typename S>
using Softmax = SoftmaxKernel<S, false>;
template <typename S>
using LogSoftmax = SoftmaxKernel<S, true>;

std::unique_ptr<CpuKernel> make_softmax(const Node& node, std::string* reason) {
  int64_t axis = normalize_axis(node.attrs.get_int("dim"), static_cast<int64_t>(node.inputs[0]->type.rank()));
  return make_floating<Softmax>(node, reason, axis);
}
std::unique_ptr<CpuKernel> make_log_softmax(const Node& node, std::string* reason) {
  int64_t axis = normalize_axis(node.attrs.get_int("dim"), static_cast<int64_t>(node.inputs[0]->type.rank()));
  return make_floating<LogSoftmax>(node, reason, axis);
}
std::unique_ptr<CpuKernel> make_layer_norm(const Node& node, std::string* reason) {
  return make_floating<LayerNormKernel>(node, reason, node.attrs.get_int("normalized_rank"),
                                        node.attrs.get_float("eps"));
}
std::unique_ptr<CpuKernel> make_batch_norm(const Node& node, std::string* reason) {
  return make_floating<BatchNormKernel>(node, reason, node.attrs.get_float("eps"));
}

}  // namespace

void register_norm_kernels(KernelMap& map) {
  map.emplace("softmax", &make_softmax);
  map.emplace("log_softmax", &make_log_softmax);
  map.emplace("layer_norm", &make_layer_norm);
  map.emplace("batch_norm", &make_batch_norm);
}

}  // namespace kiln::cpu::internal
