// Launch structs of the CUDA kernels that surround cuDNN convolutions (and
// cuBLASLt products whose epilogue could not be fused) and
// implement the pooling and inference batch-norm ops (conv_kernels.cu,
// pool_kernels.cu). Host code fills them once at lowering and sets the data
// pointers per call (launch.h says why plain structs). Dtypes are kiln::DType
// values as ints; every kernel computes in float (double for f64).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kiln::cuda {

// y[i] = act(y[i] + bias[c] + residual[i]) in place over a dense output whose
// channel index is (i / channel_stride) % channels; bias and residual (dense,
// y's layout) may be null. Serves convolutions (channel axis) and matrix
// products (last axis: channel_stride 1).
enum class Activation : int { none, relu, gelu, gelu_tanh };
struct BiasActArgs {
  void* y = nullptr;
  const void* bias = nullptr;
  const void* residual = nullptr;
  int dtype = 0;
  int64_t n = 0, channel_stride = 1, channels = 1, bias_stride = 1;
  Activation act = Activation::none;
};
cudaError_t launch_bias_act(const BiasActArgs& a, cudaStream_t s);

// 2-D pooling over a 4-D input read through its strides (logical N, C, H, W);
// the output is dense with the same logical order given by out_strides.
enum class PoolKind : int { max, avg, adaptive_avg };
struct PoolArgs {
  PoolKind kind = PoolKind::max;
  const void* x = nullptr;
  void* y = nullptr;
  void* indices = nullptr;  // max: i64 flat h * W + w within the input plane (may be null)
  int dtype = 0;
  int64_t dims[4] = {};         // input N, C, H, W
  int64_t x_strides[4] = {};    // input strides in that order
  int64_t out_hw[2] = {};       // OH, OW
  int64_t out_strides[4] = {};  // output strides for N, C, OH, OW (values and indices alike)
  bool channels_inner = false;  // threads walk C fastest (channels-last output), else OW fastest
  int64_t kernel[2] = {1, 1}, stride[2] = {1, 1}, padding[2] = {}, dilation[2] = {1, 1};
  bool count_include_pad = true;
  int64_t divisor_override = 0;
};
cudaError_t launch_pool(const PoolArgs& a, cudaStream_t s);

// Inference batch norm over channel axis 1: y = (x - mean) * rsqrt(var + eps) * w + b.
struct BatchNormArgs {
  const void* x = nullptr;
  void* y = nullptr;
  const void* mean = nullptr;
  const void* var = nullptr;
  const void* weight = nullptr;  // null: 1
  const void* bias = nullptr;    // null: 0
  int dtype = 0, param_dtype[4] = {};
  int64_t param_stride[4] = {1, 1, 1, 1};
  int64_t n = 0, channels = 1, inner = 1;  // x dense: channel = (i / inner) % channels
  double eps = 1e-5;
};
cudaError_t launch_batch_norm(const BatchNormArgs& a, cudaStream_t s);

}  // namespace kiln::cuda
