// Internal: the CPU backend's table of kernel factories by op name. Each
// family file defines one register_*_kernels function; kernel_registry.cpp
// calls them all once.
#pragma once

#include <map>
#include <string>

#include "backends/cpu/cpu_kernel.h"

namespace kiln::cpu::internal {

using KernelMap = std::map<std::string, CpuKernelFactory, std::less<>>;

void register_elementwise_kernels(KernelMap& map);  // every op in elementwise.def, and cast
void register_reduction_kernels(KernelMap& map);
void register_linalg_kernels(KernelMap& map);  // matmul, conv2d
void register_norm_kernels(KernelMap& map);
void register_pool_kernels(KernelMap& map);
void register_data_kernels(KernelMap& map);  // copies: contiguous, concat, pad, gather, index ops, creation
void register_attention_kernels(KernelMap& map);
void register_fused_kernels(KernelMap& map);

}  // namespace kiln::cpu::internal
