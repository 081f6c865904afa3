// The CUDA backend's C entry points. The backend is a separate shared library
// (libkiln_cuda.so) that the core loads only when a CUDA device is asked for,
// so the core and the Python module import on machines without CUDA.
#pragma once

#include <cstdint>

extern "C" {
// Number of visible CUDA devices, or -1 with `error` (a static string) set.
int kiln_cuda_device_count(const char** error);
// Elementwise self-check: y[i] = op(x[i]) for every unary op in elementwise.def
// on f32, run on the device, so the shared scalar math is proven to compile
// and run under nvcc. Returns 0 on success.
int kiln_cuda_unary_f32(const char* op_name, const float* host_x, float* host_y, int64_t n, const char** error);
}
