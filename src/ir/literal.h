// Reading and writing single elements of any dtype as double (literals,
// reference kernels and tests use these; hot loops use typed code instead).
#pragma once

#include "ir/dtype.h"

namespace kiln {

double load_scalar(const void* p, DType dtype);
void store_scalar(void* p, DType dtype, double v);
// `v` as an element of `dtype` holds it (rounded, saturated or truncated as store_scalar writes it).
double round_to(DType dtype, double v);

}  // namespace kiln
