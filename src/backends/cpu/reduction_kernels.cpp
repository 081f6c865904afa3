// CPU reference kernels for the reductions: sum, mean, amax, amin, var,
// argmax, argmin over any set of axes of a strided input. Floating sums,
// means and variances accumulate in double (var in two passes); integer and
// bool sums in int64. amax/amin propagate NaN; arg reductions pick the first
// extreme and treat NaN as the extreme (like torch). Outputs are split over
// the thread pool when the input is large. A sum or mean whose reduced axes
// lie outside the kept ones adds whole rows into a block of accumulators,
// in the same order per output.
#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>

#include "backends/cpu/dtype_dispatch.h"
#include "backends/cpu/elementwise_loop.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/reduce_loop.h"
#include "ops/broadcast.h"
#include "ops/op_def.h"

namespace kiln::cpu::internal {

namespace {

enum class Reduce { sum, mean, amax, amin, var, argmax, argmin };

// Output storage type of reduction R over storage S.
template <Reduce R, typename S>
using reduce_out_t = std::conditional_t<R == Reduce::argmax || R == Reduce::argmin, int64_t,
                                        std::conditional_t<R == Reduce::sum && !is_float_storage<S>, int64_t, S>>;

template <typename C>
inline bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

template <Reduce R, typename S>
class ReduceKernel final : public CpuKernel {
 public:
  ReduceKernel(std::vector<int64_t> axes, double correction) : axes_(std::move(axes)), correction_(correction) {}

  void run(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
           const CpuContext& ctx) const override {
    using O = reduce_out_t<R, S>;
    const TensorView& in = inputs[0];
    const S* src = in.ptr<const S>();
    O* dst = outputs[0].ptr<O>();
    ReduceLayout layout = make_reduce_layout(in.dims, in.strides, axes_);
    int64_t n_out = numel(layout.kept_dims);
    if constexpr (R == Reduce::sum || R == Reduce::mean) {
      if (kept_inner(layout)) {
        run_rows(src, dst, layout, n_out, in.numel(), ctx);
        return;
      }
    }
    split_outputs(ctx, in.numel(), n_out, layout.red_count, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> scratch;
      int64_t j = begin;
      for_each_offset<1>(layout.kept_dims, {&layout.kept_strides}, begin, end, [&](const std::array<int64_t, 1>& o) {
        dst[j++] = reduce_one(src, o[0], layout, scratch);
      });
    });
  }

 private:
  // Runs body(begin, end) over the n_out outputs: on this thread for a small input, else split over the pool
  // in chunks of about kParallelThreshold / 2 input elements.
  template <typename Body>
  static void split_outputs(const CpuContext& ctx, int64_t total, int64_t n_out, int64_t red_count, Body&& body) {
    if (total <= kParallelThreshold || n_out <= 1) {
      if (n_out > 0) body(0, n_out);
      return;
    }
    ctx.pool.parallel_for(n_out, std::max<int64_t>(1, kParallelThreshold / 2 / std::max<int64_t>(red_count, 1)), body);
  }

  // True when the input's innermost axis is kept and every reduced axis lies outside it (a sum over the
  // batch, over [B, T, C]'s tokens): each output is then best reached by adding whole reduced rows.
  static bool kept_inner(const ReduceLayout& l) {
    return !l.kept_strides.empty() && l.kept_strides.back() == 1 && !l.red_strides.empty() &&
           l.red_strides.back() > 1 && l.red_count > 1;
  }

  // sum and mean with the reduced axes outside the kept ones: for a block of outputs, each reduced row in
  // row-major order is added into the block's accumulators, which run along contiguous input. Every output
  // still adds its elements in visit_reduced's order, so the result is the one reduce_one gives.
  void run_rows(const S* src, reduce_out_t<R, S>* dst, const ReduceLayout& l, int64_t n_out, int64_t total,
                const CpuContext& ctx) const {
    using O = reduce_out_t<R, S>;
    using A = std::conditional_t<is_float_storage<S>, double, int64_t>;
    constexpr int64_t kBlock = 2048;  // accumulators of one block stay in L1/L2
    auto body = [&](int64_t begin, int64_t end) {
      std::vector<A> acc(static_cast<size_t>(std::min(kBlock, end - begin)));
      std::vector<int64_t> scratch, offsets;
      // Runs of outputs whose input elements are adjacent: (first output, length, input offset).
      std::vector<std::array<int64_t, 3>> runs;
      for (int64_t b = begin; b < end; b += kBlock) {
        const int64_t n = std::min(kBlock, end - b);
        offsets.clear();
        for_each_offset<1>(l.kept_dims, {&l.kept_strides}, b, b + n,
                           [&](const std::array<int64_t, 1>& o) { offsets.push_back(o[0]); });
        runs.clear();
        for (int64_t i = 0; i < n; ++i) {
          if (!runs.empty() && runs.back()[2] + runs.back()[1] == offsets[static_cast<size_t>(i)])
            ++runs.back()[1];
          else
            runs.push_back({i, 1, offsets[static_cast<size_t>(i)]});
        }
        std::fill(acc.begin(), acc.begin() + n, A(0));
        visit_reduced(l, 0, scratch, [&](int64_t row) {
          for (const auto& [first, length, at] : runs) {
            A* a = acc.data() + first;
            const S* x = src + row + at;
            for (int64_t j = 0; j < length; ++j) a[j] += static_cast<A>(to_compute<S>(x[j]));
          }
        });
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (R == Reduce::mean) {
            dst[b + i] = from_compute<O, double>(static_cast<double>(acc[static_cast<size_t>(i)]) /
                                                 static_cast<double>(l.red_count));
          } else {
            dst[b + i] = from_compute<O, A>(acc[static_cast<size_t>(i)]);
          }
        }
      }
    };
    split_outputs(ctx, total, n_out, l.red_count, body);
  }

  reduce_out_t<R, S> reduce_one(const S* src, int64_t base, const ReduceLayout& l,
                                std::vector<int64_t>& scratch) const {
    using O = reduce_out_t<R, S>;
    using C = compute_t<S>;
    if constexpr (R == Reduce::sum || R == Reduce::mean) {
      using A = std::conditional_t<is_float_storage<S>, double, int64_t>;
      A acc = 0;
      visit_reduced(l, base, scratch, [&](int64_t off) { acc += static_cast<A>(to_compute<S>(src[off])); });
      if constexpr (R == Reduce::mean) {
        return from_compute<O, double>(static_cast<double>(acc) / static_cast<double>(l.red_count));
      } else {
        return from_compute<O, A>(acc);
      }
    } else if constexpr (R == Reduce::var) {
      double sum = 0;
      visit_reduced(l, base, scratch, [&](int64_t off) { sum += static_cast<double>(to_compute<S>(src[off])); });
      double mean = sum / static_cast<double>(l.red_count);
      double sq = 0;
      visit_reduced(l, base, scratch, [&](int64_t off) {
        double d = static_cast<double>(to_compute<S>(src[off])) - mean;
        sq += d * d;
      });
      double denom = std::max(0.0, static_cast<double>(l.red_count) - correction_);
      return from_compute<O, double>(sq / denom);
    } else if constexpr (R == Reduce::amax || R == Reduce::amin) {
      bool first = true;
      C best{};
      visit_reduced(l, base, scratch, [&](int64_t off) {
        C v = to_compute<S>(src[off]);
        if (first || is_nan(v) || (!is_nan(best) && (R == Reduce::amax ? v > best : v < best))) best = v;
        first = false;
      });
      if constexpr (std::is_same_v<S, bool>) {
        return best != 0;
      } else {
        return from_compute<O, C>(best);
      }
    } else {
      C best{};
      int64_t best_index = 0, k = 0;
      visit_reduced(l, base, scratch, [&](int64_t off) {
        C v = to_compute<S>(src[off]);
        bool take = k == 0 || (!is_nan(best) && (is_nan(v) || (R == Reduce::argmax ? v > best : v < best)));
        if (take) {
          best = v;
          best_index = k;
        }
        ++k;
      });
      return best_index;
    }
  }

  std::vector<int64_t> axes_;
  double correction_;
};

template <Reduce R>
std::unique_ptr<CpuKernel> make_reduce(const Node& node, std::string* reason) {
  const TensorType& x = node.inputs[0]->type;
  const int64_t rank = static_cast<int64_t>(x.rank());
  std::vector<int64_t> axes;
  double correction = 0;
  if constexpr (R == Reduce::argmax || R == Reduce::argmin) {
    if (node.attrs.get_bool("flatten"))
      axes = normalize_axes({}, rank);
    else
      axes = {normalize_axis(node.attrs.get_int("dim"), rank)};
  } else {
    axes = normalize_axes(node.attrs.get_ints("dims"), rank);
  }
  if (rank == 0) axes.clear();
  if constexpr (R == Reduce::var) correction = node.attrs.get_float("correction");
  if constexpr (R == Reduce::mean || R == Reduce::var) {
    if (!is_floating(x.dtype)) {
      *reason = str_cat("needs a floating-point input, got ", dtype_name(x.dtype));
      return nullptr;
    }
  }
  return dispatch_dtype(x.dtype, [&]<typename S>() -> std::unique_ptr<CpuKernel> {
    return std::make_unique<ReduceKernel<R, S>>(axes, correction);
  });
}

// cumsum along one axis: one running sum (in the compute type) per line.
template <typename S>
class CumsumKernel final : public CpuKernel {
 public:
  explicit CumsumKernel(int64_t axis) : axis_(axis) {}

  void run(std::span<const TensorView> in, std::span<const TensorView> out, const CpuContext&) const override {
    const TensorView& x = in[0];
    const TensorView& y = out[0];
    const S* src = x.ptr<S>();
    S* dst = y.ptr<S>();
    const int64_t rank = static_cast<int64_t>(x.dims.size());
    if (x.numel() == 0) return;
    if (rank == 0) {
      dst[0] = src[0];
      return;
    }
    const int64_t n = x.dims[axis_], lines = x.numel() / n;
    std::vector<int64_t> index(rank, 0);  // position over the other axes; index[axis_] stays 0
    for (int64_t line = 0; line < lines; ++line) {
      int64_t xo = 0, yo = 0;
      for (int64_t d = 0; d < rank; ++d) {
        xo += index[d] * x.strides[d];
        yo += index[d] * y.strides[d];
      }
      compute_t<S> sum{};
      for (int64_t k = 0; k < n; ++k) {
        sum += to_compute<S>(src[xo + k * x.strides[axis_]]);
        dst[yo + k * y.strides[axis_]] = from_compute<S>(sum);
      }
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (d == axis_) continue;
        if (++index[d] < x.dims[d]) break;
        index[d] = 0;
      }
    }
  }

 private:
  int64_t axis_;
};

std::unique_ptr<CpuKernel> make_cumsum(const Node& node, std::string* reason) {
  const TensorType& x = node.inputs[0]->type;
  const int64_t rank = static_cast<int64_t>(x.rank());
  const int64_t axis = rank == 0 ? 0 : normalize_axis(node.attrs.get_int("dim"), rank);
  return dispatch_dtype(x.dtype, [&]<typename S>() -> std::unique_ptr<CpuKernel> {
    return std::make_unique<CumsumKernel<S>>(axis);
  });
}

}  // namespace

void register_reduction_kernels(KernelMap& map) {
  map.emplace("cumsum", &make_cumsum);
  map.emplace("sum", &make_reduce<Reduce::sum>);
  map.emplace("mean", &make_reduce<Reduce::mean>);
  map.emplace("amax", &make_reduce<Reduce::amax>);
  map.emplace("amin", &make_reduce<Reduce::amin>);
  map.emplace("var", &make_reduce<Reduce::var>);
  map.emplace("argmax", &make_reduce<Reduce::argmax>);
  map.emplace("argmin", &make_reduce<Reduce::argmin>);
}

}  // namespace kiln::cpu::internal
