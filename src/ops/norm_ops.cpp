// norm op declarations (stub: filled in by the op-table work).
#include "ops/op_registry.h"

namespace kiln::ops_internal {

void register_norm_ops(OpList&) {}

}  // namespace kiln::ops_internal
