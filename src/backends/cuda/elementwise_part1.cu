// Part 1 of the elementwise kernels' instantiations (elementwise_kernels.cuh).
#define KILN_ELEMENTWISE_PART 1
#include "backends/cuda/elementwise_part.inc"
