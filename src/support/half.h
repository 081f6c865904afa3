// 16-bit float storage types (IEEE half and bfloat16) with conversions to and
// from float. Arithmetic happens in float; these only store.
#pragma once

#include <cstdint>
#include <cstring>

namespace kiln {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) {
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it quiet NaN
      bits = static_cast<uint16_t>((u >> 16) | 0x40u);
      return;
    }
    uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
    bits = static_cast<uint16_t>((u + rounding) >> 16);
  }
  explicit operator float() const { return bits_float(static_cast<uint32_t>(bits) << 16); }
};

struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float f) {
    uint32_t x = float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) {  // NaN
      bits = static_cast<uint16_t>(sign | 0x7e00u);
      return;
    }
    if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
      bits = static_cast<uint16_t>(sign | 0x7c00u);
      return;
    }
    if (abs < 0x38800000u) {  // subnormal half (or zero): scale by 2^24 and round
      float magnitude = bits_float(abs) * 16777216.0f;  // exact power-of-two scaling
      // nearbyint under default rounding mode is round-half-even.
      uint32_t m = static_cast<uint32_t>(__builtin_nearbyintf(magnitude));
      bits = static_cast<uint16_t>(sign | m);
      return;
    }
    uint32_t mant_odd = (abs >> 13) & 1u;
    abs += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
    bits = static_cast<uint16_t>(sign | (abs >> 13));
  }
  explicit operator float() const {
    uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
    uint32_t exp = (bits >> 10) & 0x1fu;
    uint32_t mant = bits & 0x3ffu;
    if (exp == 0) {
      float f = static_cast<float>(mant) * (1.0f / 16777216.0f);
      return sign ? -f : f;
    }
    if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
    return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
  }
};

}  // namespace kiln
