// pool CPU kernels (stub: filled in by the CPU backend work).
#include "backends/cpu/kernel_registry.h"

namespace kiln::cpu::internal {

void register_pool_kernels(KernelMap&) {}

}  // namespace kiln::cpu::internal
