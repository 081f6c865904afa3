// Byte-moving helpers shared by the CPU data kernels (data_*.cpp): strided
// copies and fills that dispatch on element size, not dtype, and split large
// work across the thread pool. Never call these from inside a parallel_for
// body (the pool runs one job at a time); the *_range forms are serial.
#pragma once

#include <array>
#include <cstddef>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backends/cpu/dtype_dispatch.h"

#include "ir/tensor_type.h"
#include "support/thread_pool.h"

namespace kiln::cpu::internal {

// Elements per parallel chunk for plain moves.
inline constexpr int64_t kCopyGrain = int64_t{1} << 15;

// Copies the elements of flat range [begin, end) of `dims` (row-major order)
// from src (element strides src_strides) to dst (dst_strides); elem_size is 1,
// 2, 4 or 8 bytes.
void copy_range(const Dims& dims, const void* src, const Dims& src_strides, void* dst, const Dims& dst_strides,
                size_t elem_size, int64_t begin, int64_t end);

// The whole copy, coalescing axes first and splitting across `pool`.
void strided_copy(ThreadPool& pool, const Dims& dims, const void* src, const Dims& src_strides, void* dst,
                  const Dims& dst_strides, size_t elem_size);

// Writes the elem_size bytes at `value` into every element of dst.
void strided_fill(ThreadPool& pool, const Dims& dims, void* dst, const Dims& dst_strides, const void* value,
                  size_t elem_size);

// `v` converted to `dtype` like a C cast, in the dtype's storage bytes
// (little-endian, first dtype_size bytes used). Floats round to nearest;
// integers truncate toward zero, saturate to the i64 range (NaN gives 0) and
// then wrap to narrower types; bool is v != 0.
std::array<uint8_t, 8> scalar_bytes(double v, DType dtype);

// The same conversion to storage type T (float, Half, ..., bool).
template <typename T>
T convert_scalar(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_integral_v<T>) {
    if (std::isnan(v)) return T(0);
    const int64_t i = v >= 9.2233720368547758e18    ? std::numeric_limits<int64_t>::max()
                      : v <= -9.2233720368547758e18 ? std::numeric_limits<int64_t>::min()
                                                    : static_cast<int64_t>(v);
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(static_cast<uint64_t>(i)));
  } else {
    return from_compute<T>(v);
  }
}

}  // namespace kiln::cpu::internal
