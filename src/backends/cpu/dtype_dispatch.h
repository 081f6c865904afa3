// Maps a runtime DType to its C++ storage type and compute type, so a kernel
// body is written once as a template. Storage: float, Half, BFloat16, double,
// int64_t, int32_t, int16_t, int8_t, uint8_t, bool. Compute: float for the
// 16-bit floats and f32, double for f64, int64_t for integers and bool.
#pragma once

#include <cstdint>
#include <type_traits>

#include "ir/dtype.h"
#include "support/error.h"
#include "support/half.h"

namespace kiln::cpu {

template <typename T>
struct ComputeOf {
  using type = int64_t;
};
template <>
struct ComputeOf<float> {
  using type = float;
};
template <>
struct ComputeOf<Half> {
  using type = float;
};
template <>
struct ComputeOf<BFloat16> {
  using type = float;
};
template <>
struct ComputeOf<double> {
  using type = double;
};
template <typename T>
using compute_t = typename ComputeOf<T>::type;

// Storage -> compute and back.
template <typename T>
inline compute_t<T> to_compute(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return static_cast<float>(v);
  } else {
    return static_cast<compute_t<T>>(v);
  }
}
template <typename T, typename C>
inline T from_compute(C v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != C(0);
  } else {
    return static_cast<T>(v);
  }
}

// dispatch_dtype(d, [&]<typename T>() { ... }) calls the lambda with T the storage type of d.
template <typename Fn>
decltype(auto) dispatch_dtype(DType d, Fn&& fn) {
  switch (d) {
    case DType::f32: return fn.template operator()<float>();
    case DType::f16: return fn.template operator()<Half>();
    case DType::bf16: return fn.template operator()<BFloat16>();
    case DType::f64: return fn.template operator()<double>();
    case DType::i64: return fn.template operator()<int64_t>();
    case DType::i32: return fn.template operator()<int32_t>();
    case DType::i16: return fn.template operator()<int16_t>();
    case DType::i8: return fn.template operator()<int8_t>();
    case DType::u8: return fn.template operator()<uint8_t>();
    case DType::boolean: return fn.template operator()<bool>();
  }
  fail(ErrorKind::runtime, "bad dtype");
}

// Like dispatch_dtype, for kernels that only take floating dtypes (f32, f64,
// f16, bf16); any other dtype fails with "<what>: unsupported dtype ...".
template <typename Fn>
void dispatch_floating(DType d, const char* what, Fn&& fn) {
  dispatch_dtype(d, [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half> ||
                  std::is_same_v<T, BFloat16>) {
      fn.template operator()<T>();
    } else {
      fail(ErrorKind::unsupported, what, ": unsupported dtype ", dtype_name(d));
    }
  });
}

}  // namespace kiln::cpu
