// Which ops kiln's CUDA plugin has kernels for, known without loading it
// (the list in cuda_kernels.def plus every elementwise op, cast and fused).
#pragma once

#include "ops/op_def.h"

namespace kiln {

bool cuda_has_kernel(const OpDef& op);

}  // namespace kiln
