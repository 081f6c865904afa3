// Element types of kiln tensors, their sizes, names and categories.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

enum class DType : uint8_t { f32, f16, bf16, f64, i64, i32, i16, i8, u8, boolean };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i64,
                                       DType::i32, DType::i16,  DType::i8,   DType::u8,  DType::boolean};

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);  // "f32", "bf16", "bool", ...
std::optional<DType> parse_dtype(std::string_view name);

inline bool is_floating(DType d) {
  return d == DType::f32 || d == DType::f16 || d == DType::bf16 || d == DType::f64;
}
inline bool is_integral(DType d) {  // integers, not bool
  return d == DType::i64 || d == DType::i32 || d == DType::i16 || d == DType::i8 || d == DType::u8;
}
inline bool is_bool(DType d) { return d == DType::boolean; }
inline bool is_half(DType d) { return d == DType::f16 || d == DType::bf16; }  // the 16-bit floats

// torch's promotion of two tensor dtypes (bool < integers < floats; f16 with bf16 gives f32).
DType promote_types(DType a, DType b);

}  // namespace kiln
