// CPU 2-D pooling kernels (max with indices, average, adaptive average) over
// NCHW or CHW inputs with any strides; threaded over (image, channel) planes.
// Window and divisor rules follow torch's CPU kernels (see pool_ops.cpp);
// max pooling propagates NaN like torch.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "backends/cpu/dtype_dispatch.h"
#include "backends/cpu/kernel_registry.h"
#include "support/error.h"

namespace kiln::cpu::internal {

namespace {

std::vector<int64_t> pair_attr(const Attrs& attrs, std::string_view name, const std::vector<int64_t>& fallback) {
  const std::vector<int64_t>& v = attrs.get_ints(name);
  if (v.empty()) return fallback;
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
}

// Input and output planes: the input's (N*C) planes are addressed through the
// strides of its leading dims; outputs are contiguous.
struct Planes {
  int64_t count = 0, channels = 1, n_stride = 0, c_stride = 0, h_stride = 0, w_stride = 0;
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;

  Planes(const TensorView& x, const TensorView& y) {
    size_t r = x.dims.size();
    channels = x.dims[r - 3];
    count = (r == 4 ? x.dims[0] : 1) * channels;
    n_stride = r == 4 ? x.strides[0] : 0;
    c_stride = x.strides[r - 3];
    h_stride = x.strides[r - 2];
    w_stride = x.strides[r - 1];
    in_h = x.dims[r - 2];
    in_w = x.dims[r - 1];
    out_h = y.dims[y.dims.size() - 2];
    out_w = y.dims.back();
  }
  int64_t offset(int64_t plane) const { return (plane / channels) * n_stride + (plane % channels) * c_stride; }
};

template <typename Fn>
void run_numeric(DType d, Fn&& fn) {
  dispatch_dtype(d, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) fn.template operator()<T>();
  });
}

// One tap of `count` windows side by side: window q reads src[q * step], whose flat index is
// flat0 + q * flat_step; it replaces the window's value so far (y[q], index[q]) when strictly larger, or when
// it is NaN and that is not. Branch-free, with nothing the stores could alias, so it runs from registers.
template <typename T>
void max_taps(const T* __restrict src, int64_t step, int64_t count, int64_t flat0, int64_t flat_step, T* __restrict y,
              int64_t* __restrict index) {
  using C = compute_t<T>;
  for (int64_t q = 0; q < count; ++q) {
    const T candidate = src[q * step];
    const C v = to_compute(candidate), best = to_compute(y[q]);
    bool take = v > best;
    if constexpr (std::is_floating_point_v<C>) take = take | ((v != v) & (best == best));
    y[q] = take ? candidate : y[q];
    index[q] = take ? flat0 + q * flat_step : index[q];
  }
}

class MaxPoolKernel final : public CpuKernel {
 public:
  explicit MaxPoolKernel(const Node& node)
      : kernel_(pair_attr(node.attrs, "kernel_size", {})),
        stride_(pair_attr(node.attrs, "stride", kernel_)),
        padding_(pair_attr(node.attrs, "padding", {0, 0})),
        dilation_(pair_attr(node.attrs, "dilation", {1, 1})) {}

  void run(std::span<const TensorView> in, std::span<const TensorView> out, const CpuContext& ctx) const override {
    Planes p(in[0], out[0]);
    const int64_t out_plane = p.out_h * p.out_w;
    auto* indices = static_cast<int64_t*>(out[1].data);
    run_numeric(in[0].dtype, [&]<typename T>() {
      const T* x = static_cast<const T*>(in[0].data);
      T* y = static_cast<T*>(out[0].data);
      const auto [lo, hi] = interior_columns(p);
      ctx.pool.parallel_for(p.count, std::max<int64_t>(1, 4096 / std::max<int64_t>(out_plane, 1)),
                            [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          const T* xp = x + p.offset(b);
          for (int64_t oh = 0; oh < p.out_h; ++oh) {
            T* y_row = y + b * out_plane + oh * p.out_w;
            int64_t* index_row = indices + b * out_plane + oh * p.out_w;
            const bool interior = hi > lo && interior_row<T>(xp, p, oh, lo, hi, y_row, index_row);
            for (int64_t ow = 0; ow < p.out_w; ++ow) {
              if (interior && ow == lo) {
                ow = hi - 1;  // written by interior_row
                continue;
              }
              window<T>(xp, p, oh, ow, y_row[ow], index_row[ow]);
            }
          }
        }
      });
    });
  }

 private:
  // Output columns [lo, hi) whose window columns all lie inside the input.
  std::pair<int64_t, int64_t> interior_columns(const Planes& p) const {
    const int64_t lo = std::min(p.out_w, (padding_[1] + stride_[1] - 1) / stride_[1]);
    const int64_t last = p.in_w - 1 + padding_[1] - (kernel_[1] - 1) * dilation_[1];  // ow * stride may reach it
    const int64_t hi = last < 0 ? 0 : std::min(p.out_w, last / stride_[1] + 1);
    return {lo, std::max(lo, hi)};
  }

  // One output of the window at (oh, ow): the first largest value and its flat index (NaN wins, the first one).
  template <typename T>
  void window(const T* xp, const Planes& p, int64_t oh, int64_t ow, T& y, int64_t& index) const {
    using C = compute_t<T>;
    C best = C(0);
    int64_t best_index = -1;
    bool saw_nan = false;
    for (int64_t i = 0; i < kernel_[0] && !saw_nan; ++i) {
      const int64_t h = oh * stride_[0] - padding_[0] + i * dilation_[0];
      if (h < 0 || h >= p.in_h) continue;
      for (int64_t j = 0; j < kernel_[1] && !saw_nan; ++j) {
        const int64_t w = ow * stride_[1] - padding_[1] + j * dilation_[1];
        if (w < 0 || w >= p.in_w) continue;
        C v = to_compute(xp[h * p.h_stride + w * p.w_stride]);
        if constexpr (std::is_floating_point_v<C>) saw_nan = std::isnan(v);
        if (best_index < 0 || v > best || saw_nan) {
          best = v;
          best_index = h * p.in_w + w;
        }
      }
    }
    y = from_compute<T>(best);
    index = best_index;
  }

  // The outputs [lo, hi) of row oh, all windows inside the input's columns, tap by tap across the row (the same
  // taps in the same order as window(), so the same winner: a later tap replaces only a strictly larger value,
  // or a NaN a value that is not NaN). False, writing nothing, when no window row lies inside the input.
  template <typename T>
  bool interior_row(const T* xp, const Planes& p, int64_t oh, int64_t lo, int64_t hi, T* y, int64_t* index) const {
    bool first = true;
    for (int64_t i = 0; i < kernel_[0]; ++i) {
      const int64_t h = oh * stride_[0] - padding_[0] + i * dilation_[0];
      if (h < 0 || h >= p.in_h) continue;
      const T* line = xp + h * p.h_stride;
      for (int64_t j = 0; j < kernel_[1]; ++j) {
        const int64_t w0 = lo * stride_[1] - padding_[1] + j * dilation_[1];  // the column of output lo's tap
        const T* src = line + w0 * p.w_stride;
        const int64_t step = stride_[1] * p.w_stride, flat0 = h * p.in_w + w0;
        if (first) {
          for (int64_t q = 0; q < hi - lo; ++q) {
            y[lo + q] = src[q * step];
            index[lo + q] = flat0 + q * stride_[1];
          }
          first = false;
          continue;
        }
        max_taps<T>(src, step, hi - lo, flat0, stride_[1], y + lo, index + lo);
      }
    }
    return !first;
  }

  std::vector<int64_t> kernel_, stride_, padding_, dilation_;
};

class AvgPoolKernel final : public CpuKernel {
 public:
  explicit AvgPoolKernel(const Node& node)
      : kernel_(pair_attr(node.attrs, "kernel_size", {})),
        stride_(pair_attr(node.attrs, "stride", kernel_)),
        padding_(pair_attr(node.attrs, "padding", {0, 0})),
        count_include_pad_(node.attrs.get_bool("count_include_pad")),
        divisor_override_(node.attrs.get_int("divisor_override")) {}

  void run(std::span<const TensorView> in, std::span<const TensorView> out, const CpuContext& ctx) const override {
    Planes p(in[0], out[0]);
    const int64_t out_plane = p.out_h * p.out_w;
    run_numeric(in[0].dtype, [&]<typename T>() {
      using C = compute_t<T>;
      const T* x = static_cast<const T*>(in[0].data);
      T* y = static_cast<T*>(out[0].data);
      ctx.pool.parallel_for(p.count, std::max<int64_t>(1, 4096 / std::max<int64_t>(out_plane, 1)),
                            [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          const T* xp = x + p.offset(b);
          for (int64_t oh = 0; oh < p.out_h; ++oh)
            for (int64_t ow = 0; ow < p.out_w; ++ow) {
              // torch: the window is clipped to the padded input for the
              // divisor, then to the input for the sum.
              int64_t h0 = oh * stride_[0] - padding_[0], w0 = ow * stride_[1] - padding_[1];
              int64_t h1 = std::min(h0 + kernel_[0], p.in_h + padding_[0]);
              int64_t w1 = std::min(w0 + kernel_[1], p.in_w + padding_[1]);
              const int64_t padded_size = (h1 - h0) * (w1 - w0);
              h0 = std::max<int64_t>(h0, 0);
              w0 = std::max<int64_t>(w0, 0);
              h1 = std::min(h1, p.in_h);
              w1 = std::min(w1, p.in_w);
              C sum = C(0);
              for (int64_t h = h0; h < h1; ++h)
                for (int64_t w = w0; w < w1; ++w) sum += to_compute(xp[h * p.h_stride + w * p.w_stride]);
              int64_t divisor = divisor_override_ ? divisor_override_
                                : count_include_pad_ ? padded_size
                                                     : (h1 - h0) * (w1 - w0);
              const int64_t o = b * out_plane + oh * p.out_w + ow;
              y[o] = from_compute<T>(sum / static_cast<C>(divisor));
            }
        }
      });
    });
  }

 private:
  std::vector<int64_t> kernel_, stride_, padding_;
  bool count_include_pad_;
  int64_t divisor_override_;
};

class AdaptiveAvgPoolKernel final : public CpuKernel {
 public:
  void run(std::span<const TensorView> in, std::span<const TensorView> out, const CpuContext& ctx) const override {
    Planes p(in[0], out[0]);
    const int64_t out_plane = p.out_h * p.out_w;
    run_numeric(in[0].dtype, [&]<typename T>() {
      using C = compute_t<T>;
      const T* x = static_cast<const T*>(in[0].data);
      T* y = static_cast<T*>(out[0].data);
      ctx.pool.parallel_for(p.count, std::max<int64_t>(1, 4096 / std::max<int64_t>(out_plane, 1)),
                            [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          const T* xp = x + p.offset(b);
          for (int64_t oh = 0; oh < p.out_h; ++oh) {
            const int64_t h0 = (oh * p.in_h) / p.out_h, h1 = ((oh + 1) * p.in_h + p.out_h - 1) / p.out_h;
            for (int64_t ow = 0; ow < p.out_w; ++ow) {
              const int64_t w0 = (ow * p.in_w) / p.out_w, w1 = ((ow + 1) * p.in_w + p.out_w - 1) / p.out_w;
              C sum = C(0);
              for (int64_t h = h0; h < h1; ++h)
                for (int64_t w = w0; w < w1; ++w) sum += to_compute(xp[h * p.h_stride + w * p.w_stride]);
              y[b * out_plane + oh * p.out_w + ow] = from_compute<T>(sum / static_cast<C>((h1 - h0) * (w1 - w0)));
            }
          }
        }
      });
    });
  }
};

template <typename K>
std::unique_ptr<CpuKernel> make_floating(const Node& node, std::string* reason) {
  if (!is_floating(node.inputs[0]->type.dtype)) {
    if (reason) *reason = "avg_pool2d needs a floating-point input";
    return nullptr;
  }
  return std::make_unique<K>(node);
}

std::unique_ptr<CpuKernel> make_max_pool(const Node& node, std::string* reason) {
  DType d = node.inputs[0]->type.dtype;
  if (!is_floating(d) && !is_integral(d)) {
    if (reason) *reason = "max_pool2d needs a numeric input";
    return nullptr;
  }
  return std::make_unique<MaxPoolKernel>(node);
}

std::unique_ptr<CpuKernel> make_adaptive(const Node& node, std::string* reason) {
  if (!is_floating(node.inputs[0]->type.dtype)) {
    if (reason) *reason = "adaptive_avg_pool2d needs a floating-point input";
    return nullptr;
  }
  return std::make_unique<AdaptiveAvgPoolKernel>();
}

}  // namespace

// NHWC operands read as NCHW views (channels_last_kernels.cpp).
std::unique_ptr<CpuKernel> with_channels_last(std::unique_ptr<CpuKernel> base, const Node& node);

void register_pool_kernels(KernelMap& map) {
  map["max_pool2d"] = [](const Node& n, std::string* r) { return with_channels_last(make_max_pool(n, r), n); };
  map["avg_pool2d"] = [](const Node& n, std::string* r) {
    return with_channels_last(make_floating<AvgPoolKernel>(n, r), n);
  };
  map["adaptive_avg_pool2d"] = [](const Node& n, std::string* r) { return with_channels_last(make_adaptive(n, r), n); };
}

}  // namespace kiln::cpu::internal
