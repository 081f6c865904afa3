// Every environment variable kiln reads, declared and documented in one place
// (docs/environment.md lists the same). Read lazily; unset means the default.
#pragma once

#include <string>

namespace kiln::env {

// KILN_NUM_THREADS: CPU worker threads (default: hardware concurrency).
int num_threads();
// KILN_DUMP_IR: "1" or a pass name: print the IR after every pass (or that one) to stderr.
std::string dump_ir();
// KILN_VERIFY_PASSES: "1" verifies the graph after every pass (on by default in debug builds and CI).
bool verify_passes();
// KILN_LOG_LEVEL: "error" (default), "warn", "info", "debug".
std::string log_level();
// KILN_CUDA_PLUGIN: path of libkiln_cuda.so (default: next to the library or
// program holding kiln's core, then the dynamic loader's search path).
std::string cuda_plugin();
// KILN_CACHE_DIR: where compiled CUDA kernels are cached (default: $HOME/.cache/kiln/kernels).
std::string kernel_cache_dir();
// KILN_NVRTC_LIBRARY: path of libnvrtc.so to load (default: searched, see backends/cuda/nvrtc_compiler.h).
std::string nvrtc_library();

}  // namespace kiln::env
