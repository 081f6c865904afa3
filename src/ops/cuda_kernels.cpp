// The CUDA plugin's op coverage as the core knows it (see cuda_kernels.def).
#include "ops/cuda_kernels.h"

#include <set>
#include <string>

namespace kiln {

bool cuda_has_kernel(const OpDef& op) {
  static const std::set<std::string, std::less<>> listed = {
#define KILN_CUDA_KERNEL(name) #name,
#include "ops/cuda_kernels.def"
#undef KILN_CUDA_KERNEL
  };
  return op.elementwise.has_value() || op.name == "cast" || op.name == "fused" || listed.contains(op.name);
}

}  // namespace kiln
