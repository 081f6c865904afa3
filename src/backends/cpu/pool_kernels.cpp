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
      using C = compute_t<T>;
      const T* x = static_cast<const T*>(in[0].data);
      T* y = static_cast<T*>(out[0].data);
      ctx.pool.parallel_for(p.count, std::max<int64_t>(1, 4096 / std::max<int64_t>(out_plane, 1)),
                            [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          const T* xp = x + p.offset(b);
          for (int64_t oh = 0; oh < p.out_h; ++oh)
            for (int64_t ow = 0; ow < p.out_w; ++ow) {
              C best = C(0);
              int64_t best_index = -1;
              bool saw_nan = false;  // NaN wins; torch keeps the first one
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
              const int64_t o = b * out_plane + oh * p.out_w + ow;
              y[o] = from_compute<T>(best);
              indices[o] = best_index;
            }
        }
      });
    });
  }

 private:
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
