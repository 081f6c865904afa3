// Internal: the CUDA backend's table of kernel factories by op name. Each
// lowering file defines one register_*_kernels function; cuda_backend.cpp
// calls them all once. An op missing here is unsupported on CUDA, with a
// reason, and the partitioner leaves it to PyTorch.
#pragma once

#include <map>
#include <string>

#include "backends/cuda/cuda_common.h"

namespace kiln::cuda {

using KernelMap = std::map<std::string, CudaKernelFactory, std::less<>>;

void register_elementwise_kernels(KernelMap& map);  // elementwise.def, cast, fused
void register_data_kernels(KernelMap& map);         // contiguous, concat, constant_pad, full, arange, index ops
void register_norm_kernels(KernelMap& map);         // softmax, log_softmax, layer_norm, sum/mean/amax/amin
void register_matmul_kernels(KernelMap& map);       // matmul through cuBLASLt
void register_attention_kernels(KernelMap& map);    // attention (flash attention for f16/bf16)
void register_conv_kernels(KernelMap& map);         // conv2d, conv2d_fused through cuDNN
void register_pool_kernels(KernelMap& map);         // max/avg/adaptive-avg pool 2d
void register_batch_norm_kernels(KernelMap& map);   // batch_norm (inference)
void register_cumsum_kernels(KernelMap& map);       // cumsum

}  // namespace kiln::cuda
