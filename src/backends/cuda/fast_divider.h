// Division by a run-time constant without a divide instruction: for a
// divisor d in [1, 2^31], n / d == (umulhi(n, m) + n) >> s for every n < 2^31
// (Granlund and Montgomery's round-up method, with the 2^32 term of the
// multiplier added back as `+ n`). Host and device code share it; without
// nvcc it is plain C++, so host tests check it against the `/` operator.
//
// Why it is exact: take s the smallest with 2^s >= d and
// m = floor(2^32 (2^s - d) / d) + 1, so that M = 2^32 + m =
// floor(2^(32+s) / d) + 1 = (2^(32+s) + e) / d with 1 <= e <= d. Then
// (umulhi(n, m) + n) >> s == floor(n M / 2^(32+s)) == floor(n / d + n e / (d 2^(32+s))),
// and n e < 2^32 2^s makes the second term below 1/d, too small to reach the
// next multiple of d. m < 2^32 because 2^s < 2d, and umulhi(n, m) < n keeps
// the sum below 2n < 2^32.
#pragma once

#include <cstdint>

#ifndef KILN_HD
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KILN_HD __host__ __device__ __forceinline__
#else
#define KILN_HD inline
#endif
#endif

namespace kiln::cuda {

struct FastDivider {
  uint32_t divisor = 1, multiplier = 1, shift = 0;

  FastDivider() = default;
  // d in [1, 2^31].
  explicit FastDivider(uint32_t d) : divisor(d) {
    while ((uint64_t{1} << shift) < d) ++shift;
    multiplier = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }

  // n / divisor, for n < 2^31.
  KILN_HD uint32_t div(uint32_t n) const {
#ifdef __CUDA_ARCH__
    const uint32_t hi = __umulhi(n, multiplier);
#else
    const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(n) * multiplier) >> 32);
#endif
    return (hi + n) >> shift;
  }
};

}  // namespace kiln::cuda
