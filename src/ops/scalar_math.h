// Scalar math shared by every backend: the CPU loops, CUDA kernels and the
// NVRTC-generated source all include this file (NVRTC gets it as embedded text),
// so an elementwise op's meaning is written exactly once (Note [Elementwise]).
// Plain C-style overloads only: no std::, no templates beyond simple ones, so
// that it compiles as host C++, CUDA C++, and under NVRTC without headers. On
// the host alone, float exp/tanh/erf come from host_math.h (loops over them
// vectorize); device code keeps CUDA's expf/tanhf/erff.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KILN_HD __host__ __device__ __forceinline__
#else
#include <cmath>
#include <cstdint>

#include "ops/host_math.h"
#define KILN_HD inline
#endif

namespace kiln {
namespace sm {

// Transcendentals: float and double overloads.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
KILN_HD float k_exp(float x) { return expf(x); }
KILN_HD float k_tanh(float x) { return tanhf(x); }
KILN_HD float k_erf(float x) { return erff(x); }
#else  // the CPU's float exp, tanh and erf vectorize in loops (host_math.h)
KILN_HD float k_exp(float x) { return host_expf(x); }
KILN_HD float k_tanh(float x) { return host_tanhf(x); }
KILN_HD float k_erf(float x) { return host_erff(x); }
#endif
KILN_HD double k_exp(double x) { return exp(x); }
KILN_HD float k_log(float x) { return logf(x); }
KILN_HD double k_log(double x) { return log(x); }
KILN_HD float k_sqrt(float x) { return sqrtf(x); }
KILN_HD double k_sqrt(double x) { return sqrt(x); }
KILN_HD float k_sin(float x) { return sinf(x); }
KILN_HD double k_sin(double x) { return sin(x); }
KILN_HD float k_cos(float x) { return cosf(x); }
KILN_HD double k_cos(double x) { return cos(x); }
KILN_HD double k_tanh(double x) { return tanh(x); }
KILN_HD double k_erf(double x) { return erf(x); }
KILN_HD float k_pow(float x, float y) { return powf(x, y); }
KILN_HD double k_pow(double x, double y) { return pow(x, y); }
KILN_HD float k_fabs(float x) { return fabsf(x); }
KILN_HD double k_fabs(double x) { return fabs(x); }

// fmod: the remainder with the sign of x (C fmod, torch.fmod). Integers: the
// frontend lowers only a nonzero constant divisor; 0 gives 0 instead of trapping.
KILN_HD float k_fmod(float x, float y) { return fmodf(x, y); }
KILN_HD double k_fmod(double x, double y) { return fmod(x, y); }
KILN_HD int64_t k_fmod(int64_t x, int64_t y) { return y == 0 ? 0 : x % y; }

template <typename T>
KILN_HD bool k_isnan(T x) {
  return x != x;
}

// abs for every compute type (ints included).
template <typename T>
KILN_HD T k_abs(T x) {
  return x < T(0) ? -x : x;
}
KILN_HD float k_abs(float x) { return fabsf(x); }
KILN_HD double k_abs(double x) { return fabs(x); }

// maximum/minimum propagate NaN, as torch.maximum does.
template <typename T>
KILN_HD T k_maximum(T x, T y) {
  return k_isnan(x) ? x : k_isnan(y) ? y : (x > y ? x : y);
}
template <typename T>
KILN_HD T k_minimum(T x, T y) {
  return k_isnan(x) ? x : k_isnan(y) ? y : (x < y ? x : y);
}
// clamp keeps a NaN x; NaN bounds propagate like torch.clamp.
template <typename T>
KILN_HD T k_clamp(T x, T lo, T hi) {
  return k_minimum(k_maximum(x, lo), hi);
}
template <typename T>
KILN_HD T k_relu(T x) {
  return k_isnan(x) ? x : (x > T(0) ? x : T(0));
}
template <typename T>
KILN_HD T k_sigmoid(T x) {
  return T(1) / (T(1) + k_exp(-x));
}
template <typename T>
KILN_HD T k_silu(T x) {
  return x / (T(1) + k_exp(-x));
}
template <typename T>
KILN_HD T k_gelu(T x) {  // exact: x * Phi(x)
  return T(0.5) * x * (T(1) + k_erf(x * T(0.70710678118654752440)));
}
template <typename T>
KILN_HD T k_gelu_tanh(T x) {
  const T k = T(0.79788456080286535588);  // sqrt(2/pi)
  return T(0.5) * x * (T(1) + k_tanh(k * (x + T(0.044715) * x * x * x)));
}
template <typename T>
KILN_HD T k_rsqrt(T x) {
  return T(1) / k_sqrt(x);
}

}  // namespace sm
}  // namespace kiln
