// The plugin's self-checks: device query and the shared elementwise math
// compiled for the device, with plain C entry points (cuda_plugin.h) that a
// test can call through ctypes. The backend itself is cuda_backend.cpp.
#include <cuda_runtime.h>

#include <cstring>

#include "backends/cuda/cuda_plugin.h"
#include "backends/cuda/device_math.cuh"

namespace kiln::cuda {
namespace {

template <typename Op>
__global__ void unary_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = Op::template apply<float>(x[i], 0.0f, 0.0f);
}

template <typename Op>
int run_unary(const float* host_x, float* host_y, int64_t n, const char** error) {
  float *dx = nullptr, *dy = nullptr;
  size_t bytes = static_cast<size_t>(n) * sizeof(float);
  cudaError_t e = cudaMalloc(&dx, bytes);
  if (e == cudaSuccess) e = cudaMalloc(&dy, bytes);
  if (e == cudaSuccess) e = cudaMemcpy(dx, host_x, bytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) {
    unary_kernel<Op><<<static_cast<unsigned>((n + 255) / 256), 256>>>(dx, dy, n);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpy(host_y, dy, bytes, cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dy);
  if (e != cudaSuccess) {
    *error = cudaGetErrorString(e);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace kiln::cuda

extern "C" int kiln_cuda_device_count(const char** error) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    *error = cudaGetErrorString(e);
    return -1;
  }
  return count;
}

extern "C" int kiln_cuda_unary_f32(const char* op_name, const float* host_x, float* host_y, int64_t n,
                                   const char** error) {
  using namespace kiln::cuda;
#define KILN_ELEMENTWISE(name, arity, kind, ...) \
  if (arity == 1 && std::strcmp(op_name, #name) == 0) return run_unary<DeviceOp_##name>(host_x, host_y, n, error);
#include "ops/elementwise.def"
#undef KILN_ELEMENTWISE
  *error = "not a unary elementwise op";
  return 2;
}
