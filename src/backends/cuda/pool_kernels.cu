// CUDA kernels of the 2-D pooling ops (pool_lowering.cpp): one thread per
// output element, the input read through its strides, so NCHW and
// channels-last inputs are both read in place. Windows, padding, ceil mode
// and divisors follow torch's kernels (and the CPU reference): max keeps the
// first maximum and propagates NaN; avg's divisor counts padding when
// count_include_pad; adaptive windows are [floor(o*I/O), ceil((o+1)*I/O)).
#include "backends/cuda/conv_kernels.h"
#include "backends/cuda/device_math.cuh"

namespace kiln::cuda {

namespace {

constexpr int kThreads = 256;

template <typename C>
__global__ void pool_kernel(const __grid_constant__ PoolArgs a) {
  const int64_t oh_n = a.out_hw[0], ow_n = a.out_hw[1], H = a.dims[2], W = a.dims[3];
  const int64_t total = a.dims[0] * a.dims[1] * oh_n * ow_n;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t ow = i % ow_n, oh = (i / ow_n) % oh_n, c = (i / (ow_n * oh_n)) % a.dims[1],
                  n = i / (ow_n * oh_n * a.dims[1]);
    const int64_t base = n * a.x_strides[0] + c * a.x_strides[1];
    const int64_t out = n * a.out_strides[0] + c * a.out_strides[1] + oh * a.out_strides[2] + ow * a.out_strides[3];
    auto at = [&](int64_t h, int64_t w) { return load_as<C>(a.x, a.dtype, base + h * a.x_strides[2] + w * a.x_strides[3]); };
    if (a.kind == PoolKind::max) {
      int64_t hs = oh * a.stride[0] - a.padding[0], ws = ow * a.stride[1] - a.padding[1];
      const int64_t he = min(hs + (a.kernel[0] - 1) * a.dilation[0] + 1, H);
      const int64_t we = min(ws + (a.kernel[1] - 1) * a.dilation[1] + 1, W);
      while (hs < 0) hs += a.dilation[0];
      while (ws < 0) ws += a.dilation[1];
      C best = -INFINITY;
      int64_t best_idx = hs * W + ws;
      for (int64_t h = hs; h < he; h += a.dilation[0])
        for (int64_t w = ws; w < we; w += a.dilation[1]) {
          const C v = at(h, w);
          if (v > best || isnan(v)) {
            best = v;
            best_idx = h * W + w;
          }
        }
      store_as<C>(a.y, a.dtype, out, best);
      if (a.indices != nullptr) static_cast<int64_t*>(a.indices)[out] = best_idx;
      continue;
    }
    int64_t hs, he, ws, we;
    C divisor;
    if (a.kind == PoolKind::avg) {
      hs = oh * a.stride[0] - a.padding[0];
      ws = ow * a.stride[1] - a.padding[1];
      he = min(hs + a.kernel[0], H + a.padding[0]);
      we = min(ws + a.kernel[1], W + a.padding[1]);
      const int64_t padded = (he - hs) * (we - ws);
      hs = max(hs, int64_t{0});
      ws = max(ws, int64_t{0});
      he = min(he, H);
      we = min(we, W);
      divisor = static_cast<C>(a.divisor_override ? a.divisor_override
                                                  : (a.count_include_pad ? padded : (he - hs) * (we - ws)));
    } else {
      hs = (oh * H) / oh_n;
      he = ((oh + 1) * H + oh_n - 1) / oh_n;
      ws = (ow * W) / ow_n;
      we = ((ow + 1) * W + ow_n - 1) / ow_n;
      divisor = static_cast<C>((he - hs) * (we - ws));
    }
    C sum = 0;
    for (int64_t h = hs; h < he; ++h)
      for (int64_t w = ws; w < we; ++w) sum += at(h, w);
    store_as<C>(a.y, a.dtype, out, (hs < he && ws < we) ? sum / divisor : C(0));
  }
}

}  // namespace

cudaError_t launch_pool(const PoolArgs& a, cudaStream_t s) {
  const int64_t total = a.dims[0] * a.dims[1] * a.out_hw[0] * a.out_hw[1];
  if (total == 0) return cudaSuccess;
  int64_t blocks = (total + kThreads - 1) / kThreads;
  const int grid = static_cast<int>(blocks < 65535 * 8 ? blocks : 65535 * 8);
  if (a.dtype == static_cast<int>(DType::f64))
    pool_kernel<double><<<grid, kThreads, 0, s>>>(a);
  else
    pool_kernel<float><<<grid, kThreads, 0, s>>>(a);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
