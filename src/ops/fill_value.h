// The check that a float attribute used as a fill value (full's value,
// constant_pad's value) is representable in the output dtype, like torch's
// overflow check: integers must be finite and in range (fractions truncate),
// floats and bool take anything.
#pragma once

#include <cmath>
#include <string_view>

#include "ir/dtype.h"
#include "support/error.h"

namespace kiln {

inline void check_fill_value(double v, DType dtype, std::string_view attr) {
  if (!is_integral(dtype)) return;
  double lo = 0, hi = 0;  // the truncated value must lie in [lo, hi]
  switch (dtype) {
    case DType::i64: lo = -9223372036854775808.0, hi = 9223372036854774784.0; break;
    case DType::i32: lo = -2147483648.0, hi = 2147483647.0; break;
    case DType::i16: lo = -32768.0, hi = 32767.0; break;
    case DType::i8: lo = -128.0, hi = 127.0; break;
    default: lo = 0.0, hi = 255.0; break;  // u8
  }
  const double t = std::trunc(v);
  KILN_CHECK(std::isfinite(v) && t >= lo && t <= hi, "attribute '", attr, "' = ", v, " cannot be converted to ",
             dtype_name(dtype), " without overflow");
}

}  // namespace kiln
