// CPU conv2d (NCHW, groups, optional bias) for f32/f64/f16/bf16.
//
// General path: the output of each image and group is cut into tiles of
// output positions (and, where positions are few, of output channels); each
// tile is one task of the pool, which unfolds its positions' patches into a
// cache-sized scratch of its own thread (im2col) and runs one single-threaded
// GEMM W_g[rows, Cg*kh*kw] @ cols into the tile. The columns are read while
// they are still in that core's cache, and nothing is allocated or zeroed per
// call. The bias is written into the tile first and the GEMM accumulates onto
// it (so f16/bf16 round once). A 1x1 stride-1 unpadded convolution reads the
// input plane as the GEMM's B directly. Depthwise-like convolutions (one input
// channel per group) use a direct loop threaded over output planes, where tiny
// GEMMs would be slow. The weight is read in place when each filter is one run
// of unit stride (the usual contiguous OIHW layout); any other layout is
// copied once per run.
#include <algorithm>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <vector>

#include "backends/cpu/dtype_dispatch.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/im2col.h"
#include "backends/cpu/kernel_registry.h"
#include "support/error.h"

namespace kiln::cpu::internal {

namespace {

// A tile's im2col columns are at most this many bytes: they stay in the core's L2 cache (1 MiB per core on
// the dev CPU) with the GEMM's packed panels beside them.
constexpr int64_t kTileBytes = 512 * 1024;
constexpr int64_t kMinTilePositions = 16;  // a tile narrower than this starves the BLAS kernel's register tile
constexpr int64_t kMinTileRows = 32;       // channel blocks, used only where positions are too few to share
constexpr double kMinFlopsPerThread = 4e6;  // below it the pool's dispatch costs more than it saves

// This thread's im2col scratch, grown as needed and kept across calls: no allocation or zero fill per call.
void* tile_scratch(size_t bytes) {
  thread_local std::unique_ptr<std::byte[]> buffer;
  thread_local size_t capacity = 0;
  if (bytes > capacity) {
    buffer.reset(new std::byte[bytes]);  // default-initialized: not zeroed
    capacity = bytes;
  }
  return buffer.get();
}

// How the output of one image and group is cut into tasks: position tiles times channel blocks.
struct Tiling {
  int64_t position_tiles = 1, tile = 1;     // tiles of `tile` output positions (the last may be shorter)
  int64_t channel_blocks = 1, block = 1;    // blocks of `block` output channels (the last may be shorter)
};

Tiling choose_tiling(int64_t plane, int64_t og, int64_t kdim, size_t elem_bytes, int64_t images, int64_t threads) {
  Tiling t;
  const int64_t widest = std::max<int64_t>(kMinTilePositions, kTileBytes / std::max<int64_t>(kdim * int64_t(elem_bytes), 1));
  t.position_tiles = (plane + widest - 1) / widest;
  // Too few tasks for the pool: narrower tiles while they stay wide enough, then channel blocks.
  if (images * t.position_tiles < threads) {
    const int64_t wanted = (threads + images - 1) / images;
    t.position_tiles = std::clamp<int64_t>(plane / (2 * kMinTilePositions), t.position_tiles, wanted);
  }
  if (images * t.position_tiles < threads) {
    const int64_t wanted = (threads + images * t.position_tiles - 1) / (images * t.position_tiles);
    t.channel_blocks = std::clamp<int64_t>(og / kMinTileRows, 1, wanted);
  } else if (images == 1 && t.position_tiles % threads != 0 && t.position_tiles < 4 * threads) {
    // A few tasks per thread: a count the pool splits evenly.
    const int64_t even = (t.position_tiles + threads - 1) / threads * threads;
    if (plane / even >= kMinTilePositions) t.position_tiles = even;
  }
  t.tile = (plane + t.position_tiles - 1) / t.position_tiles;
  t.position_tiles = (plane + t.tile - 1) / t.tile;
  t.block = (og + t.channel_blocks - 1) / t.channel_blocks;
  t.channel_blocks = (og + t.block - 1) / t.block;
  return t;
}

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
    const int64_t batch = x.dims[0];
    const int64_t out_channels = w.dims[0], cg = w.dims[1], og = out_channels / groups_;
    ConvGeometry g{x.dims[2], x.dims[3], w.dims[2], w.dims[3], stride_[0], stride_[1], padding_[0], padding_[1],
                   dilation_[0], dilation_[1], y.dims[y.dims.size() - 2], y.dims.back()};
    const int64_t plane = g.out_h * g.out_w;
    const int64_t kdim = cg * g.kernel_h * g.kernel_w;
    if (batch == 0 || out_channels == 0 || plane == 0) return;

    const T* pbias = in.size() > 2 ? static_cast<const T*>(in[2].data) : nullptr;
    const int64_t bias_stride = in.size() > 2 ? in[2].strides[0] : 0;
    const bool pointwise = g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 && g.stride_w == 1 &&
                           g.pad_h == 0 && g.pad_w == 0 && (g.in_w == 1 || x.strides[3] == 1) &&
                           (g.in_h == 1 || x.strides[2] == g.in_w);
    const bool depthwise = cg == 1 && groups_ > 1;
    if (pointwise || depthwise) {
      // Bias first (the GEMMs and the direct loop accumulate onto it), zeros without one.
      ctx.pool.parallel_for(batch * out_channels, std::max<int64_t>(1, 16384 / plane), [&](int64_t b0, int64_t b1) {
        for (int64_t bo = b0; bo < b1; ++bo) {
          T v = pbias ? pbias[(bo % out_channels) * bias_stride] : T{};
          std::fill(py + bo * plane, py + (bo + 1) * plane, v);
        }
      });
    }
    if (depthwise) return run_depthwise<T>(x, w, pw, px, py, g, og, ctx);

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

    if (pointwise) {
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t grp = 0; grp < groups_; ++grp)
          gemm(y.dtype, og, plane, kdim, MatrixRef{pw + grp * og * w_row_stride, w_row_stride, 1},
               MatrixRef{px + n * x.strides[0] + grp * cg * x.strides[1], x.strides[1], 1},
               py + (n * out_channels + grp * og) * plane, plane, true, ctx.pool);
      return;
    }

    const double flops = 2.0 * double(batch * out_channels) * double(plane) * double(kdim);
    const int64_t threads = std::clamp<int64_t>(int64_t(flops / kMinFlopsPerThread), 1, ctx.pool.size());
    const Tiling t = choose_tiling(plane, og, kdim, sizeof(T), batch * groups_, threads);
    const int64_t per_group = t.position_tiles * t.channel_blocks, tasks = batch * groups_ * per_group;
    ctx.pool.parallel_for(tasks, (tasks + threads - 1) / threads, [&](int64_t t0, int64_t t1) {
      T* cols = static_cast<T*>(tile_scratch(static_cast<size_t>(kdim * t.tile) * sizeof(T)));
      for (int64_t task = t0; task < t1; ++task) {
        const int64_t image_group = task / per_group, n = image_group / groups_, grp = image_group % groups_;
        const int64_t p0 = (task % per_group) / t.channel_blocks * t.tile, p1 = std::min(plane, p0 + t.tile);
        const int64_t o0 = (task % t.channel_blocks) * t.block, o1 = std::min(og, o0 + t.block);
        const int64_t width = p1 - p0;
        // Channel blocks of one tile come in a row: the previous task's columns are these.
        if (task == t0 || o0 == 0)
          im2col(y.dtype, px + n * x.strides[0] + grp * cg * x.strides[1], cg, x.strides[1], x.strides[2],
                 x.strides[3], g, p0, p1, cols, ctx.pool);
        T* y_tile = py + (n * out_channels + grp * og) * plane + p0;
        if (pbias != nullptr)
          for (int64_t o = o0; o < o1; ++o)
            std::fill(y_tile + o * plane, y_tile + o * plane + width, pbias[(grp * og + o) * bias_stride]);
        gemm(y.dtype, o1 - o0, width, kdim, MatrixRef{pw + (grp * og + o0) * w_row_stride, w_row_stride, 1},
             MatrixRef{cols, width, 1}, y_tile + o0 * plane, plane, pbias != nullptr, ctx.pool);
      }
    });
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
