// Part 2 of the elementwise kernels' instantiations (elementwise_kernels.cuh).
#define KILN_ELEMENTWISE_PART 2
#include "backends/cuda/elementwise_part.inc"
