// The CPU's float exp, tanh and erf (ops/host_math.h) against the correctly
// rounded result (double libm, rounded to float): their largest error in ulp
// over 4.3 million floats spread over every exponent, and the special values
// (NaN, infinities, signed zeros, overflow, subnormal results).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/host_math.h"

namespace kiln::test {
namespace {

// |got - want| in units of the last place of want (a float's ulp; subnormal spacing below FLT_MIN).
double ulp_error(float got, double want) {
  const float w = static_cast<float>(want);
  if (std::isinf(w) || std::isinf(got)) return got == w ? 0 : std::numeric_limits<double>::infinity();
  const double ulp = std::nextafter(std::fabs(w), std::numeric_limits<float>::infinity()) - std::fabs(w);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

// The largest error of f against ref over every 997th float bit pattern (both signs, all exponents).
template <typename F, typename R>
double max_ulp_error(F f, R ref, float* worst_x) {
  double worst = 0;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 997) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
    if (std::isnan(x)) continue;
    const double e = ulp_error(f(x), ref(static_cast<double>(x)));
    if (e > worst) {
      worst = e;
      *worst_x = x;
    }
  }
  return worst;
}

TEST(HostMath, ExpIsWithinTwoUlp) {
  float at = 0;
  const double err = max_ulp_error(sm::host_expf, [](double x) { return std::exp(x); }, &at);
  EXPECT_LE(err, 2.0) << "at x = " << at;
}

TEST(HostMath, TanhIsWithinThreeUlp) {
  float at = 0;
  const double err = max_ulp_error(sm::host_tanhf, [](double x) { return std::tanh(x); }, &at);
  EXPECT_LE(err, 3.0) << "at x = " << at;
}

TEST(HostMath, ErfIsWithinThreeUlp) {
  float at = 0;
  const double err = max_ulp_error(sm::host_erff, [](double x) { return std::erf(x); }, &at);
  EXPECT_LE(err, 3.0) << "at x = " << at;
}

TEST(HostMath, SpecialValuesBehaveAsLibm) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(sm::host_expf(nan)));
  EXPECT_TRUE(std::isnan(sm::host_tanhf(nan)));
  EXPECT_TRUE(std::isnan(sm::host_erff(nan)));
  EXPECT_EQ(sm::host_expf(inf), inf);
  EXPECT_EQ(sm::host_expf(-inf), 0.0f);
  EXPECT_EQ(sm::host_expf(88.8f), inf);  // past FLT_MAX
  EXPECT_EQ(sm::host_expf(0.0f), 1.0f);
  EXPECT_EQ(sm::host_expf(-200.0f), 0.0f);
  // Subnormal results: e^-100 is 3.72e-44, below FLT_MIN.
  EXPECT_NEAR(sm::host_expf(-100.0f), std::exp(-100.0), 2 * std::numeric_limits<float>::denorm_min());
  EXPECT_GT(sm::host_expf(-100.0f), 0.0f);
  for (float (*f)(float) : {sm::host_tanhf, sm::host_erff}) {
    EXPECT_EQ(f(inf), 1.0f);
    EXPECT_EQ(f(-inf), -1.0f);
    EXPECT_EQ(f(30.0f), 1.0f);
    EXPECT_EQ(std::bit_cast<uint32_t>(f(0.0f)), std::bit_cast<uint32_t>(0.0f));
    EXPECT_EQ(std::bit_cast<uint32_t>(f(-0.0f)), std::bit_cast<uint32_t>(-0.0f));  // odd: the sign of zero kept
  }
}

}  // namespace
}  // namespace kiln::test
