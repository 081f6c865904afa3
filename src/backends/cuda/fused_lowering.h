// Lowering of fused elementwise groups (op "fused") to kernels generated and
// compiled at lowering time (Note [Generated fused kernels] in fused_codegen.h).
#pragma once

#include "backends/cuda/cuda_common.h"

namespace kiln::cuda {

std::unique_ptr<BackendKernel> make_fused_kernel(const Node& node, const LowerContext& ctx, std::string* reason);

}  // namespace kiln::cuda
