// Device helpers shared by the CUDA kernels: reading and writing any kiln
// dtype from a compute type with the CPU backend's conversion rules
// (backends/cpu/dtype_dispatch.h and the cast kernel), the offset of an
// operand in a strided space (offset_of: index_space.h), and the
// elementwise ops of elementwise.def as device functors over the shared
// scalar math (Note [Elementwise]).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "backends/cuda/launch.h"
#include "ir/dtype.h"
#include "ops/scalar_math.h"

namespace kiln::cuda {

#define KILN_D __device__ __forceinline__

template <typename C>
KILN_D C load_as(const void* base, int dtype, int64_t off) {
  switch (static_cast<DType>(dtype)) {
    case DType::f32: return static_cast<C>(static_cast<const float*>(base)[off]);
    case DType::f16: return static_cast<C>(__half2float(static_cast<const __half*>(base)[off]));
    case DType::bf16: return static_cast<C>(__bfloat162float(static_cast<const __nv_bfloat16*>(base)[off]));
    case DType::f64: return static_cast<C>(static_cast<const double*>(base)[off]);
    case DType::i64: return static_cast<C>(static_cast<const int64_t*>(base)[off]);
    case DType::i32: return static_cast<C>(static_cast<const int32_t*>(base)[off]);
    case DType::i16: return static_cast<C>(static_cast<const int16_t*>(base)[off]);
    case DType::i8: return static_cast<C>(static_cast<const int8_t*>(base)[off]);
    case DType::u8: return static_cast<C>(static_cast<const uint8_t*>(base)[off]);
    case DType::boolean: return static_cast<C>(static_cast<const uint8_t*>(base)[off] != 0 ? 1 : 0);
  }
  return C(0);
}

// Reads a value as 0 or 1: x != 0 compared in its own dtype.
template <typename C>
KILN_D C load_bool(const void* base, int dtype, int64_t off) {
  DType d = static_cast<DType>(dtype);
  bool nz = (d == DType::f32 || d == DType::f16 || d == DType::bf16 || d == DType::f64)
                ? load_as<double>(base, dtype, off) != 0.0
                : load_as<int64_t>(base, dtype, off) != 0;
  return nz ? C(1) : C(0);
}

// A compute value to an integer like the CPU cast: floats truncate toward
// zero; NaN and out-of-range values give INT64_MIN, then wrap.
template <typename C>
KILN_D int64_t to_int64(C v) {
  if constexpr (std::is_integral_v<C>) {
    return static_cast<int64_t>(v);
  } else {
    double d = static_cast<double>(v);
    return (d > -9223372036854775808.0 && d < 9223372036854775808.0) ? static_cast<int64_t>(d) : INT64_MIN;
  }
}

template <typename C>
KILN_D void store_as(void* base, int dtype, int64_t off, C v) {
  switch (static_cast<DType>(dtype)) {
    case DType::f32: static_cast<float*>(base)[off] = static_cast<float>(v); return;
    case DType::f16: static_cast<__half*>(base)[off] = __float2half_rn(static_cast<float>(v)); return;
    case DType::bf16: static_cast<__nv_bfloat16*>(base)[off] = __float2bfloat16_rn(static_cast<float>(v)); return;
    case DType::f64: static_cast<double*>(base)[off] = static_cast<double>(v); return;
    case DType::i64: static_cast<int64_t*>(base)[off] = to_int64(v); return;
    case DType::i32: static_cast<int32_t*>(base)[off] = static_cast<int32_t>(to_int64(v)); return;
    case DType::i16: static_cast<int16_t*>(base)[off] = static_cast<int16_t>(to_int64(v)); return;
    case DType::i8: static_cast<int8_t*>(base)[off] = static_cast<int8_t>(to_int64(v)); return;
    case DType::u8: static_cast<uint8_t*>(base)[off] = static_cast<uint8_t>(to_int64(v)); return;
    case DType::boolean: static_cast<uint8_t*>(base)[off] = v != C(0) ? 1 : 0; return;
  }
}

KILN_D int64_t operand_offset(int64_t i, const IndexSpace& space, const Operand& op) {
  return op.linear ? i : offset_of(i, space, op.strides);
}

// One device functor per elementwise op: apply<C>(x, y, z) is the .def
// expression in compute type C.
#define KILN_ELEMENTWISE(name, arity_, kind_, ...)                                   \
  struct DeviceOp_##name {                                                           \
    static constexpr int arity = arity_;                                             \
    static constexpr bool floating_only = ElementwiseKindIs_##kind_ == 1;            \
    template <typename C>                                                            \
    KILN_D static C apply([[maybe_unused]] C x, [[maybe_unused]] C y, [[maybe_unused]] C z) { \
      return static_cast<C>(__VA_ARGS__);                                            \
    }                                                                                \
  };
inline constexpr int ElementwiseKindIs_arith = 0, ElementwiseKindIs_floating = 1, ElementwiseKindIs_compare = 0,
                     ElementwiseKindIs_logical = 0, ElementwiseKindIs_select = 0;
#include "ops/elementwise.def"
#undef KILN_ELEMENTWISE

// Op indices in elementwise.def's order, and the ops by index in device code.
enum ElementwiseIndex : int {
#define KILN_ELEMENTWISE(name, ...) kOp_##name,
#include "ops/elementwise.def"
#undef KILN_ELEMENTWISE
  kNumElementwiseOps
};

template <typename C>
KILN_D C apply_op(int op, C x, C y, C z) {
  switch (op) {
#define KILN_ELEMENTWISE(name, ...)                                                \
  case kOp_##name:                                                                 \
    if constexpr (std::is_integral_v<C> && DeviceOp_##name::floating_only) {       \
      return C(0);                                                                 \
    } else {                                                                       \
      return DeviceOp_##name::template apply<C>(x, y, z);                          \
    }
#include "ops/elementwise.def"
#undef KILN_ELEMENTWISE
    default: return x;  // kCastOp: the identity
  }
}

}  // namespace kiln::cuda
