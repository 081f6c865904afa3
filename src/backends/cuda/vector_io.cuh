// Typed element and 16-byte vector access for the fast paths of the row and
// elementwise kernels: f16, bf16 and f32 storage read as float and written
// from float with round-to-nearest-even, bit-for-bit the conversions of
// load_as and store_as (device_math.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "backends/cuda/device_math.cuh"

namespace kiln::cuda {

template <typename T>
KILN_D float to_float(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else return v;
}

template <typename T>
KILN_D T from_float(float v) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(v);
  else return v;
}

// Elements of T in one 16-byte vector.
template <typename T>
inline constexpr int kPack = 16 / static_cast<int>(sizeof(T));

// The storage bits of T (16 or 32 bits) and back.
template <typename T>
using Bits = std::conditional_t<sizeof(T) == 2, uint16_t, uint32_t>;

template <typename T>
KILN_D T from_bits(Bits<T> b) {
  if constexpr (std::is_same_v<T, __half>) return __ushort_as_half(b);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __ushort_as_bfloat16(b);
  else return __uint_as_float(b);
}

template <typename T>
KILN_D Bits<T> to_bits(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half_as_ushort(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat16_as_ushort(v);
  else return __float_as_uint(v);
}

// x[j] = element j of a 16-byte vector of T, for j < kPack<T>.
template <typename T>
KILN_D void unpack(uint4 raw, float (&x)[kPack<T>]) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
  constexpr int per_word = kPack<T> / 4;
#pragma unroll
  for (int j = 0; j < kPack<T>; ++j)
    x[j] = to_float(from_bits<T>(static_cast<Bits<T>>(w[j / per_word] >> (32 / per_word * (j % per_word)))));
}

// x[j] = p[j] for j < kPack<T>; p is 16-byte aligned.
template <typename T>
KILN_D void load_pack(const T* p, float (&x)[kPack<T>]) {
  unpack<T>(*reinterpret_cast<const uint4*>(p), x);
}

// p[j] = y[j] rounded to T, for j < kPack<T>; p is 16-byte aligned.
template <typename T>
KILN_D void store_pack(T* p, const float (&y)[kPack<T>]) {
  uint32_t w[4] = {0, 0, 0, 0};
  constexpr int per_word = kPack<T> / 4;
#pragma unroll
  for (int j = 0; j < kPack<T>; ++j)
    w[j / per_word] |= static_cast<uint32_t>(to_bits(from_float<T>(y[j]))) << (32 / per_word * (j % per_word));
  *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}

}  // namespace kiln::cuda
