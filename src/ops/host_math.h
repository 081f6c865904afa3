// float exp, tanh and erf for the CPU, branch-free so that a loop over an array
// of them vectorizes (glibc's expf/tanhf/erff are scalar calls: GPT-2's
// gelu_tanh spent a fifth of its CPU time in them). scalar_math.h's float
// k_exp/k_tanh/k_erf use these on the host, so every CPU kernel, fused or not,
// computes the same values. Accuracy against the correctly rounded result: a few
// ulp (tests/cpp/host_math_test.cpp measures it); NaN, infinities and underflow
// to subnormals and zero behave as in libm. Polynomial coefficients are fitted
// for kiln (relative error weighted least squares, Chebyshev nodes).
#pragma once

#include <bit>
#include <cstdint>

namespace kiln::sm {

namespace host_math_detail {

// 2^n for an integer-valued n in [-126, 127], from its exponent bits.
inline float pow2i(int32_t n) { return std::bit_cast<float>(static_cast<int32_t>((n + 127) << 23)); }

// e^r for |r| <= ln(2)/2.
inline float exp_reduced(float r) {
  return 1.000000001f +
         r * (1.000000036f +
              r * (4.999999208e-01f + r * (1.666642010e-01f + r * (4.166822612e-02f +
                                                                   r * (8.374822070e-03f + r * 1.383683401e-03f)))));
}

}  // namespace host_math_detail

inline float host_expf(float x) {
  using namespace host_math_detail;
  const bool nan = x != x;
  // Below -104 the result is 0 and above 89 infinity; clamping keeps n in range.
  float xc = nan ? 0.0f : (x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x));
  // n = round(x / ln 2) by the 1.5 * 2^23 shift (no float-to-int rounding mode needed).
  constexpr float kShift = 12582912.0f;
  const float shifted = xc * 1.44269504088896341f + kShift;
  const float nf = shifted - kShift;
  const int32_t n = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kShift);
  // r = x - n ln 2 in two parts; n * 0.693359375 is exact (9 + 8 significant bits).
  const float r = (xc - nf * 0.693359375f) - nf * -2.12194440e-4f;
  // 2^n as two factors, so subnormal results and overflow to infinity come out of the products.
  const int32_t half = n >> 1;
  const float y = exp_reduced(r) * pow2i(half) * pow2i(n - half);
  return nan ? x : y;
}

inline float host_tanhf(float x) {
  const float a = x < 0.0f ? -x : x;
  // |x| < 0.625: x * P(x^2).
  const float x2 = x * x;
  const float small =
      x * (9.999999961e-01f +
           x2 * (-3.333326061e-01f +
                 x2 * (1.333112870e-01f + x2 * (-5.372113621e-02f + x2 * (2.059116267e-02f + x2 * -5.660151113e-03f)))));
  // Otherwise 1 - 2 / (e^(2|x|) + 1) with x's sign (1 once e^(2|x|) is past float's range; NaN stays NaN).
  const float big = 1.0f - 2.0f / (host_expf(2.0f * a) + 1.0f);
  const float signed_big = x < 0.0f ? -big : big;
  return a < 0.625f ? small : signed_big;
}

inline float host_erff(float x) {
  const float a = x < 0.0f ? -x : x;
  // |x| < 0.921875: x * P(x^2).
  const float x2 = x * x;
  const float small =
      x * (1.128379150e+00f +
           x2 * (-3.761249385e-01f +
                 x2 * (1.128181722e-01f + x2 * (-2.676664437e-02f + x2 * (4.993213106e-03f + x2 * -5.990993506e-04f)))));
  // Otherwise 1 - e^(-x^2) Q(t), t = 1 / (1 + |x| / 2), Q fitted to erfc(a) e^(a^2) on [0.921875, 4]; 1 past 4
  // (erfc(4) is under half an ulp of 1).
  const float ac = a < 4.0f ? a : 4.0f;
  const float t = 1.0f / (1.0f + 0.5f * ac);
  const float q =
      6.096813874e-04f +
      t * (2.735500854e-01f +
           t * (3.313461254e-01f +
                t * (9.943397798e-02f + t * (4.073674686e-01f + t * (-6.080225415e-02f + t * -5.217411922e-02f)))));
  const float big = a < 4.0f ? 1.0f - host_expf(-ac * ac) * q : 1.0f;
  const float signed_big = x < 0.0f ? -big : big;
  return a < 0.921875f ? small : (a == a ? signed_big : x);
}

}  // namespace kiln::sm
