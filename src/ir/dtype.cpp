// DType names, sizes and promotion.
#include "ir/dtype.h"

#include "support/error.h"

namespace kiln {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f64:
    case DType::i64: return 8;
    case DType::f32:
    case DType::i32: return 4;
    case DType::f16:
    case DType::bf16:
    case DType::i16: return 2;
    case DType::i8:
    case DType::u8:
    case DType::boolean: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f64: return "f64";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
    case DType::i16: return "i16";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::boolean: return "bool";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType d : kAllDTypes)
    if (dtype_name(d) == name) return d;
  return std::nullopt;
}

namespace {
int category(DType d) { return is_bool(d) ? 0 : is_integral(d) ? 1 : 2; }
int float_rank(DType d) {
  switch (d) {
    case DType::f16:
    case DType::bf16: return 0;
    case DType::f32: return 1;
    default: return 2;
  }
}
int int_rank(DType d) {
  switch (d) {
    case DType::u8:
    case DType::i8: return 0;
    case DType::i16: return 1;
    case DType::i32: return 2;
    default: return 3;
  }
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    if (float_rank(a) == 0 && float_rank(b) == 0) return DType::f32;  // f16 + bf16
    return float_rank(a) >= float_rank(b) ? a : b;
  }
  // integers: u8 with i8 promotes to i16, as in torch.
  if ((a == DType::u8 && b == DType::i8) || (a == DType::i8 && b == DType::u8)) return DType::i16;
  return int_rank(a) >= int_rank(b) ? a : b;
}

}  // namespace kiln
