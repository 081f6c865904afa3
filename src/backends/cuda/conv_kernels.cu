// The bias-and-activation epilogue for a cuDNN convolution or a cuBLASLt
// product that could not fuse it (conv_lowering.cpp, matmul_lowering.cpp), and the inference batch-norm kernel
// (batch_norm_lowering.cpp). Grid-stride loops, computed in float (double for
// f64) through the shared load_as/store_as of device_math.cuh. A residual add
// with no bias (a ResNet block's skip connection after its last convolution)
// takes a 16-byte vector path.
#include "backends/cuda/conv_kernels.h"
#include "backends/cuda/device_math.cuh"
#include "backends/cuda/vector_io.cuh"
#include "ir/dtype.h"

namespace kiln::cuda {

namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

template <typename C>
__global__ void bias_act_kernel(const __grid_constant__ BiasActArgs a) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < a.n; i += int64_t{blockDim.x} * gridDim.x) {
    C v = load_as<C>(a.y, a.dtype, i);
    if (a.bias != nullptr) v += load_as<C>(a.bias, a.dtype, ((i / a.channel_stride) % a.channels) * a.bias_stride);
    if (a.residual != nullptr) v += load_as<C>(a.residual, a.dtype, i);
    if (a.act == Activation::relu) v = sm::k_relu(v);
    if (a.act == Activation::gelu) v = sm::k_gelu(v);
    if (a.act == Activation::gelu_tanh) v = sm::k_gelu_tanh(v);
    store_as<C>(a.y, a.dtype, i, v);
  }
}

// y = act(y + residual) over whole 16-byte packs (the launcher checks n and the alignment).
template <typename T>
__global__ void residual_act_kernel(const __grid_constant__ BiasActArgs a) {
  constexpr int P = kPack<T>;
  T* y = static_cast<T*>(a.y);
  const T* r = static_cast<const T*>(a.residual);
  for (int64_t i = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * P; i < a.n; i += int64_t{blockDim.x} * gridDim.x * P) {
    float v[P], w[P];
    load_pack(y + i, v);
    load_pack(r + i, w);
#pragma unroll
    for (int j = 0; j < P; ++j) {
      float x = v[j] + w[j];
      if (a.act == Activation::relu) x = sm::k_relu(x);
      v[j] = x;
    }
    store_pack(y + i, v);
  }
}

template <typename T>
bool try_residual_pack(const BiasActArgs& a, cudaStream_t s) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (a.n % kPack<T> != 0 || !aligned(a.y) || !aligned(a.residual)) return false;
  residual_act_kernel<T><<<blocks_for(a.n / kPack<T>), kThreads, 0, s>>>(a);
  return true;
}

template <typename C>
__global__ void batch_norm_kernel(const __grid_constant__ BatchNormArgs a) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < a.n; i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t c = (i / a.inner) % a.channels;
    const C mean = load_as<C>(a.mean, a.param_dtype[0], c * a.param_stride[0]);
    const C var = load_as<C>(a.var, a.param_dtype[1], c * a.param_stride[1]);
    C scale = C(1) / sqrt(var + static_cast<C>(a.eps));
    if (a.weight != nullptr) scale *= load_as<C>(a.weight, a.param_dtype[2], c * a.param_stride[2]);
    C v = (load_as<C>(a.x, a.dtype, i) - mean) * scale;
    if (a.bias != nullptr) v += load_as<C>(a.bias, a.param_dtype[3], c * a.param_stride[3]);
    store_as<C>(a.y, a.dtype, i, v);
  }
}

}  // namespace

cudaError_t launch_bias_act(const BiasActArgs& a, cudaStream_t s) {
  if (a.n == 0) return cudaSuccess;
  if (a.bias == nullptr && a.residual != nullptr && (a.act == Activation::none || a.act == Activation::relu)) {
    const DType d = static_cast<DType>(a.dtype);
    if ((d == DType::f16 && try_residual_pack<__half>(a, s)) ||
        (d == DType::bf16 && try_residual_pack<__nv_bfloat16>(a, s)) ||
        (d == DType::f32 && try_residual_pack<float>(a, s)))
      return cudaGetLastError();
  }
  if (a.dtype == static_cast<int>(DType::f64))
    bias_act_kernel<double><<<blocks_for(a.n), kThreads, 0, s>>>(a);
  else
    bias_act_kernel<float><<<blocks_for(a.n), kThreads, 0, s>>>(a);
  return cudaGetLastError();
}

cudaError_t launch_batch_norm(const BatchNormArgs& a, cudaStream_t s) {
  if (a.n == 0) return cudaSuccess;
  if (a.dtype == static_cast<int>(DType::f64))
    batch_norm_kernel<double><<<blocks_for(a.n), kThreads, 0, s>>>(a);
  else
    batch_norm_kernel<float><<<blocks_for(a.n), kThreads, 0, s>>>(a);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
