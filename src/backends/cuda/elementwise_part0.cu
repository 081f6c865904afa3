// Part 0 of the elementwise kernels' instantiations (elementwise_kernels.cuh).
#define KILN_ELEMENTWISE_PART 0
#include "backends/cuda/elementwise_part.inc"

namespace kiln::cuda {
extern const Forms kElementwiseCastForms = forms<kCastOp, false>();
}  // namespace kiln::cuda
