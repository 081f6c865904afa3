// The CUDA backend's C entry points: the whole contract between kiln's core
// and libkiln_cuda.so (loaded by runtime/cuda_plugin_loader.cpp). The plugin
// is built from the same sources and compiler as the core, so a Backend object
// may cross the boundary as a C++ object; the core only calls its virtuals and
// deletes it through the virtual destructor. Bump KILN_CUDA_ABI when the
// Backend interface or these functions change.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln {
class Backend;
}

#define KILN_CUDA_ABI 5
// The plugin is built with hidden visibility; only these are exported.
#define KILN_CUDA_EXPORT __attribute__((visibility("default")))

extern "C" {
// KILN_CUDA_ABI of the plugin; the loader refuses a plugin of another version.
KILN_CUDA_EXPORT int kiln_cuda_abi_version();
// Number of visible CUDA devices, or -1 with `error` (a static string) set.
KILN_CUDA_EXPORT int kiln_cuda_device_count(const char** error);
// A new CUDA backend for device `index` (the caller owns it), or null with the
// reason written into `error` (at most error_len bytes, NUL-terminated).
KILN_CUDA_EXPORT kiln::Backend* kiln_cuda_create_backend(int index, char* error, size_t error_len);
// Elementwise self-check: y[i] = op(x[i]) for every unary op in elementwise.def
// on f32, run on the device, so the shared scalar math is proven to compile
// and run under nvcc. Returns 0 on success.
KILN_CUDA_EXPORT int kiln_cuda_unary_f32(const char* op_name, const float* host_x, float* host_y, int64_t n, const char** error);
// The generated-kernel cache's counters since the process started (tests read
// them through ctypes): out[0] NVRTC compiles, [1] memory hits, [2] disk hits,
// [3] disk files rejected (corrupt, short), [4] disk writes.
KILN_CUDA_EXPORT void kiln_cuda_kernel_cache_stats(int64_t out[5]);
// Drops the in-memory kernel cache, so the next compile reads the disk cache.
KILN_CUDA_EXPORT void kiln_cuda_kernel_cache_forget();
}
