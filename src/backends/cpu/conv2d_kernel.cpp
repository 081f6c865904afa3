// CPU conv2d (NCHW, groups, optional bias) for f32/f64/f16/bf16.
//
// General path: per image and group, im2col over a bounded range of output
// positions, then one GEMM W_g[Og, Cg*kh*kw] @ cols into the output rows (the
// bias is written first and the GEMM accumulates, so f16/bf16 round once).
// A 1x1 stride-1 unpadded convolution reads the input plane as the GEMM's B
// directly. Depthwise-like convolutions (one input channel per group) use a
// direct loop threaded over output planes, where tiny GEMMs would be slow.
// The weight is read in place when each filter is one run of unit stride
// (the usual contiguous OIHW layout); any other layout is copied once per run.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "backends/cpu/dtype_dispatch.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/im2col.h"
#include "backends/cpu/kernel_registry.h"
#include "support/error.h"

namespace kiln::cpu::internal {

namespace {

constexpr int64_t kColsElems = int64_t{1} << 20;  // im2col scratch bound (elements) per chunk

std::vector<int64_t> pair_attr(const Attrs& attrs, std::string_view name) {
  const std::vector<int64_t>& v = attrs.get_ints(name);
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
}

// The 4-D view of an NCHW or CHW tensor (batch 1, stride 0 when unbatched).
struct View4 {
  Dims dims, strides;
};
View4 as_4d(const TensorView& v) {
  if (v.dims.size() == 4) return {v.dims, v.strides};
  return {{1, v.dims[0], v.dims[1], v.dims[2]}, {0, v.strides[0], v.strides[1], v.strides[2]}};
}

class Conv2dKernel final : public CpuKernel {
 public:
  explicit Conv2dKernel(const Node& node)
      : stride_(pair_attr(node.attrs, "stride")),
        padding_(pair_attr(node.attrs, "padding")),
        dilation_(pair_attr(node.attrs, "dilation")),
        groups_(node.attrs.get_int("groups")) {}

  void run(std::span<const TensorView> in, std::span<const TensorView> out, const CpuContext& ctx) const override {
    dispatch_floating(out[0].dtype, "conv2d", [&]<typename T>() { run_typed<T>(in, out[0], ctx); });
  }

 private:
  template <typename T>
  void run_typed(std::span<const TensorView> in, const TensorView& y, const CpuContext& ctx) const {
    View4 x = as_4d(in[0]);
    const TensorView& w = in[1];
    const T* px = static_cast<const T*>(in[0].data);
    const T* pw = static_cast<const T*>(w.data);
    T* py = static_cast<T*>(y.data);
    const int64_t batch = x.dims[0], channels = x.dims[1];
    const int64_t out_channels = w.dims[0], cg = w.dims[1], og = out_channels / groups_;
    ConvGeometry g{x.dims[2], x.dims[3], w.dims[2], w.dims[3], stride_[0], stride_[1], padding_[0], padding_[1],
                   dilation_[0], dilation_[1], y.dims[y.dims.size() - 2], y.dims.back()};
    const int64_t plane = g.out_h * g.out_w;
    const int64_t kdim = cg * g.kernel_h * g.kernel_w;
    if (batch == 0 || out_channels == 0 || plane == 0) return;
    (void)channels;

    // Bias first (GEMMs accumulate onto it), zeros without one.
    const T* pbias = in.size() > 2 ? static_cast<const T*>(in[2].data) : nullptr;
    const int64_t bias_stride = in.size() > 2 ? in[2].strides[0] : 0;
    ctx.pool.parallel_for(batch * out_channels, std::max<int64_t>(1, 16384 / plane), [&](int64_t b0, int64_t b1) {
      for (int64_t bo = b0; bo < b1; ++bo) {
        T v = pbias ? pbias[(bo % out_channels) * bias_stride] : T{};
        std::fill(py + bo * plane, py + (bo + 1) * plane, v);
      }
    });

    if (cg == 1 && groups_ > 1) return run_depthwise<T>(x, w, pw, px, py, g, og, ctx);

    // Weight as [O, kdim]: in place when each filter is one unit-stride run.
    std::vector<T> w_copy;
    int64_t w_row_stride = w.strides[0];
    bool filter_contiguous = (w.dims[3] == 1 || w.strides[3] == 1) &&
                             (w.dims[2] == 1 || w.strides[2] == w.dims[3]) &&
                             (w.dims[1] == 1 || w.strides[1] == w.dims[2] * w.dims[3]);
    if (!filter_contiguous) {
      w_copy.resize(static_cast<size_t>(out_channels * kdim));
      for (int64_t o = 0; o < out_channels; ++o)
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t i = 0; i < g.kernel_h; ++i)
            for (int64_t j = 0; j < g.kernel_w; ++j)
              w_copy[static_cast<size_t>(((o * cg + c) * g.kernel_h + i) * g.kernel_w + j)] =
                  pw[o * w.strides[0] + c * w.strides[1] + i * w.strides[2] + j * w.strides[3]];
      pw = w_copy.data();
      w_row_stride = kdim;
    }

    const bool pointwise = g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 && g.stride_w == 1 &&
                           g.pad_h == 0 && g.pad_w == 0 && (g.in_w == 1 || x.strides[3] == 1) &&
                           (g.in_h == 1 || x.strides[2] == g.in_w);
    const int64_t chunk = std::clamp<int64_t>(kColsElems / std::max<int64_t>(kdim, 1), 1, plane);
    std::vector<T> cols(pointwise ? 0 : static_cast<size_t>(kdim * chunk));
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t grp = 0; grp < groups_; ++grp) {
        const T* x_group = px + n * x.strides[0] + grp * cg * x.strides[1];
        const T* w_group = pw + grp * og * w_row_stride;
        T* y_group = py + (n * out_channels + grp * og) * plane;
        MatrixRef a{w_group, w_row_stride, 1};
        if (pointwise) {
          gemm(y.dtype, og, plane, kdim, a, MatrixRef{x_group, x.strides[1], 1}, y_group, plane, true, ctx.pool);
          continue;
        }
        for (int64_t p0 = 0; p0 < plane; p0 += chunk) {
          const int64_t p1 = std::min(plane, p0 + chunk);
          im2col(y.dtype, x_group, cg, x.strides[1], x.strides[2], x.strides[3], g, p0, p1, cols.data(), ctx.pool);
          gemm(y.dtype, og, p1 - p0, kdim, a, MatrixRef{cols.data(), p1 - p0, 1}, y_group + p0, plane, true,
               ctx.pool);
        }
      }
    }
  }

  // One input channel per group: direct loop over output planes.
  template <typename T>
  void run_depthwise(const View4& x, const TensorView& w, const T* pw, const T* px, T* py, const ConvGeometry& g,
                     int64_t og, const CpuContext& ctx) const {
    using C = compute_t<T>;
    const int64_t batch = x.dims[0], out_channels = w.dims[0], plane = g.out_h * g.out_w;
    ctx.pool.parallel_for(batch * out_channels, std::max<int64_t>(1, 4096 / plane), [&](int64_t b0, int64_t b1) {
      for (int64_t bo = b0; bo < b1; ++bo) {
        const int64_t n = bo / out_channels, o = bo % out_channels, c = o / og;
        const T* xp = px + n * x.strides[0] + c * x.strides[1];
        const T* wp = pw + o * w.strides[0];
        T* yp = py + bo * plane;
        for (int64_t oh = 0; oh < g.out_h; ++oh)
          for (int64_t ow = 0; ow < g.out_w; ++ow) {
            C acc = to_compute(yp[oh * g.out_w + ow]);  // the bias
            for (int64_t i = 0; i < g.kernel_h; ++i) {
              const int64_t h = oh * g.stride_h - g.pad_h + i * g.dilation_h;
              if (h < 0 || h >= g.in_h) continue;
              for (int64_t j = 0; j < g.kernel_w; ++j) {
                const int64_t ww = ow * g.stride_w - g.pad_w + j * g.dilation_w;
                if (ww < 0 || ww >= g.in_w) continue;
                acc += to_compute(xp[h * x.strides[2] + ww * x.strides[3]]) *
                       to_compute(wp[i * w.strides[2] + j * w.strides[3]]);
              }
            }
            yp[oh * g.out_w + ow] = from_compute<T>(acc);
          }
      }
    });
  }

  std::vector<int64_t> stride_, padding_, dilation_;
  int64_t groups_;
};

}  // namespace

std::unique_ptr<CpuKernel> make_conv2d_kernel(const Node& node, std::string* reason) {
  DType d = node.outputs[0]->type.dtype;
  if (!is_floating(d)) {
    if (reason) *reason = "conv2d supports f32, f64, f16 and bf16 only";
    return nullptr;
  }
  return std::make_unique<Conv2dKernel>(node);
}

}  // namespace kiln::cpu::internal
