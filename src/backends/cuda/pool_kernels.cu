// CUDA kernels of the 2-D pooling ops (pool_lowering.cpp). Windows, padding,
// ceil mode and divisors follow torch's kernels (and the CPU reference): max
// keeps the first maximum and propagates NaN; avg's divisor counts padding
// when count_include_pad; adaptive windows are [floor(o*I/O), ceil((o+1)*I/O)).
//
// Two kernels share the window arithmetic (window_of), the max rule (takes)
// and the average's division (finished), so they give the same bits:
// - pool_channels_last: a channels-last f16/bf16/f32 pool without indices
//   (the layout pass's NHWC chains). A thread computes 16 bytes of adjacent
//   channels of one output pixel with vector loads and 32-bit index math. On
//   the H200 (2026-12-03) resnet50's max pool at batch 32 took 431-499 us in
//   the general kernel, whose per-element cost is 64-bit index division and a
//   dtype switch per load.
// - pool_kernel: everything else; one thread per output element in memory
//   order (channels fastest for a channels-last output, so loads coalesce),
//   the input read through its strides.
#include "backends/cuda/conv_kernels.h"
#include "backends/cuda/device_math.cuh"
#include "backends/cuda/fast_divider.h"
#include "backends/cuda/vector_io.cuh"

namespace kiln::cuda {

namespace {

constexpr int kThreads = 256;

// The input rows and columns an output element reads (h = hs, hs + dh, ... < he; the same for w),
// and the divisor of an average.
struct Window {
  int64_t hs, he, dh, ws, we, dw;
  int64_t divisor;
};

__device__ Window window_of(const PoolArgs& a, int64_t oh, int64_t ow) {
  const int64_t H = a.dims[2], W = a.dims[3];
  Window r{0, 0, 1, 0, 0, 1, 1};
  if (a.kind == PoolKind::max) {
    r.hs = oh * a.stride[0] - a.padding[0];
    r.ws = ow * a.stride[1] - a.padding[1];
    r.he = min(r.hs + (a.kernel[0] - 1) * a.dilation[0] + 1, H);
    r.we = min(r.ws + (a.kernel[1] - 1) * a.dilation[1] + 1, W);
    r.dh = a.dilation[0];
    r.dw = a.dilation[1];
    while (r.hs < 0) r.hs += r.dh;
    while (r.ws < 0) r.ws += r.dw;
  } else if (a.kind == PoolKind::avg) {
    r.hs = oh * a.stride[0] - a.padding[0];
    r.ws = ow * a.stride[1] - a.padding[1];
    r.he = min(r.hs + a.kernel[0], H + a.padding[0]);
    r.we = min(r.ws + a.kernel[1], W + a.padding[1]);
    const int64_t padded = (r.he - r.hs) * (r.we - r.ws);
    r.hs = max(r.hs, int64_t{0});
    r.ws = max(r.ws, int64_t{0});
    r.he = min(r.he, H);
    r.we = min(r.we, W);
    r.divisor = a.divisor_override ? a.divisor_override : (a.count_include_pad ? padded : (r.he - r.hs) * (r.we - r.ws));
  } else {
    const int64_t oh_n = a.out_hw[0], ow_n = a.out_hw[1];
    r.hs = (oh * H) / oh_n;
    r.he = ((oh + 1) * H + oh_n - 1) / oh_n;
    r.ws = (ow * W) / ow_n;
    r.we = ((ow + 1) * W + ow_n - 1) / ow_n;
    r.divisor = (r.he - r.hs) * (r.we - r.ws);
  }
  return r;
}

// Whether a max pool takes v over the maximum so far: the first maximum wins, NaN propagates.
template <typename C>
__device__ bool takes(C best, C v) {
  return v > best || isnan(v);
}

template <typename C>
__device__ C finished(PoolKind kind, const Window& r, C acc) {
  if (kind == PoolKind::max) return acc;
  return (r.hs < r.he && r.ws < r.we) ? acc / static_cast<C>(r.divisor) : C(0);
}

template <typename C>
__global__ void pool_kernel(const __grid_constant__ PoolArgs a) {
  const int64_t oh_n = a.out_hw[0], ow_n = a.out_hw[1], W = a.dims[3];
  const int64_t total = a.dims[0] * a.dims[1] * oh_n * ow_n;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{blockDim.x} * gridDim.x) {
    int64_t n, c, oh, ow;
    if (a.channels_inner) {
      c = i % a.dims[1];
      ow = (i / a.dims[1]) % ow_n;
      oh = (i / (a.dims[1] * ow_n)) % oh_n;
      n = i / (a.dims[1] * ow_n * oh_n);
    } else {
      ow = i % ow_n;
      oh = (i / ow_n) % oh_n;
      c = (i / (ow_n * oh_n)) % a.dims[1];
      n = i / (ow_n * oh_n * a.dims[1]);
    }
    const int64_t base = n * a.x_strides[0] + c * a.x_strides[1];
    const int64_t out = n * a.out_strides[0] + c * a.out_strides[1] + oh * a.out_strides[2] + ow * a.out_strides[3];
    const Window r = window_of(a, oh, ow);
    C acc = a.kind == PoolKind::max ? C(-INFINITY) : C(0);
    int64_t best_idx = r.hs * W + r.ws;
    for (int64_t h = r.hs; h < r.he; h += r.dh)
      for (int64_t w = r.ws; w < r.we; w += r.dw) {
        const C v = load_as<C>(a.x, a.dtype, base + h * a.x_strides[2] + w * a.x_strides[3]);
        if (a.kind != PoolKind::max) {
          acc += v;
        } else if (takes(acc, v)) {
          acc = v;
          best_idx = h * W + w;
        }
      }
    store_as<C>(a.y, a.dtype, out, finished(a.kind, r, acc));
    if (a.indices != nullptr) static_cast<int64_t*>(a.indices)[out] = best_idx;
  }
}

// `groups` divides by C / kPack<T>, `ow_div` by OW, `oh_div` by OH; total < 2^31 (launch_pool checks).
template <typename T>
__global__ void pool_channels_last(const __grid_constant__ PoolArgs a, uint32_t total, FastDivider groups,
                                   FastDivider ow_div, FastDivider oh_div) {
  constexpr int P = kPack<T>;
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += blockDim.x * gridDim.x) {
    const uint32_t pixel = groups.div(i), c = (i - pixel * groups.divisor) * P;
    const uint32_t rest = ow_div.div(pixel), ow = pixel - rest * ow_div.divisor;
    const uint32_t n = oh_div.div(rest), oh = rest - n * oh_div.divisor;
    const T* base = x + n * a.x_strides[0] + c;
    const Window r = window_of(a, oh, ow);
    float acc[P];
#pragma unroll
    for (int j = 0; j < P; ++j) acc[j] = a.kind == PoolKind::max ? -INFINITY : 0.f;
    for (int64_t h = r.hs; h < r.he; h += r.dh)
      for (int64_t w = r.ws; w < r.we; w += r.dw) {
        float v[P];
        load_pack(base + h * a.x_strides[2] + w * a.x_strides[3], v);
#pragma unroll
        for (int j = 0; j < P; ++j) {
          if (a.kind != PoolKind::max) acc[j] += v[j];
          else if (takes(acc[j], v[j])) acc[j] = v[j];
        }
      }
#pragma unroll
    for (int j = 0; j < P; ++j) acc[j] = finished(a.kind, r, acc[j]);
    store_pack(y + n * a.out_strides[0] + oh * a.out_strides[2] + ow * a.out_strides[3] + c, acc);
  }
}

int grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

// The vector path: channels innermost on both sides, whole 16-byte packs at 16-byte aligned
// addresses, no indices, and a pack count that 32-bit index math covers.
template <typename T>
bool try_channels_last(const PoolArgs& a, cudaStream_t s) {
  constexpr int P = kPack<T>;
  const int64_t C = a.dims[1];
  const int64_t total = a.dims[0] * a.out_hw[0] * a.out_hw[1] * (C / P);
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  bool ok = a.indices == nullptr && a.x_strides[1] == 1 && a.out_strides[1] == 1 && C % P == 0 && aligned(a.x) &&
            aligned(a.y) && total < (int64_t{1} << 31);
  for (int d : {0, 2, 3}) ok = ok && a.x_strides[d] % P == 0 && a.out_strides[d] % P == 0;
  if (!ok) return false;
  pool_channels_last<T><<<grid_for(total), kThreads, 0, s>>>(
      a, static_cast<uint32_t>(total), FastDivider(static_cast<uint32_t>(C / P)),
      FastDivider(static_cast<uint32_t>(a.out_hw[1])), FastDivider(static_cast<uint32_t>(a.out_hw[0])));
  return true;
}

}  // namespace

cudaError_t launch_pool(const PoolArgs& a, cudaStream_t s) {
  const int64_t total = a.dims[0] * a.dims[1] * a.out_hw[0] * a.out_hw[1];
  if (total == 0) return cudaSuccess;
  const DType dtype = static_cast<DType>(a.dtype);
  const bool vector = (dtype == DType::f16 && try_channels_last<__half>(a, s)) ||
                      (dtype == DType::bf16 && try_channels_last<__nv_bfloat16>(a, s)) ||
                      (dtype == DType::f32 && try_channels_last<float>(a, s));
  if (vector) return cudaGetLastError();
  if (dtype == DType::f64)
    pool_kernel<double><<<grid_for(total), kThreads, 0, s>>>(a);
  else
    pool_kernel<float><<<grid_for(total), kThreads, 0, s>>>(a);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
