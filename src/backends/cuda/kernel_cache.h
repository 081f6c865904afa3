// The cache of compiled kernels: CUBINs keyed by a content hash of everything
// that decides the machine code (the source and its headers, the exact
// architecture, NVRTC's version and kiln's codegen version), kept in memory
// for the process and on disk under $KILN_CACHE_DIR (default
// ~/.cache/kiln/kernels), so a second compile of the same model, in this
// process or a later one, runs no NVRTC.
//
// Disk files are written atomically (a temporary file in the same folder,
// then rename) and carry a header (magic, key, size, checksum): a file that
// is short, corrupt or for another key is ignored and rewritten, never
// loaded. A cache folder that cannot be written only costs the disk cache
// (a warning in the log), never a compile. Pure C++ (no CUDA headers).
//
// Misses compile on a small pool of threads (one per core, at most 8), so the
// fused kernels of a model compile side by side: a lowering asks for its
// CUBIN with cubin_async and waits only when it first needs the code. A key
// asked for again while it compiles shares the one compile. fork() waits for
// running compiles; the child starts with a fresh cache and pool.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/nvrtc_compiler.h"

namespace kiln::cuda {

struct KernelCacheStats {
  int64_t nvrtc_compiles = 0;  // NVRTC runs (nvrtc_compile_count())
  int64_t memory_hits = 0;
  int64_t disk_hits = 0;
  int64_t disk_rejects = 0;  // files present but ignored (corrupt, short, other key)
  int64_t disk_writes = 0;
};

// Bumped when generated code changes meaning without its text changing.
inline constexpr const char* kKilnCodegenVersion = "kiln 0.1.0 codegen 1";

// The content hash (32 hex digits) of a kernel's inputs.
std::string kernel_cache_key(const std::string& source, const std::vector<NvrtcHeader>& headers, int arch,
                             const std::string& nvrtc_version);
// $KILN_CACHE_DIR, else $HOME/.cache/kiln/kernels.
std::string kernel_cache_dir();
using CubinFuture = std::shared_future<std::shared_ptr<const std::string>>;

// The CUBIN for `source` compiled for sm_<arch>: from memory, else disk, else
// NVRTC (then stored in both), looked up and compiled on the compile pool.
// get() rethrows a compile error.
CubinFuture cubin_async(const std::string& source, const std::vector<NvrtcHeader>& headers, int arch,
                        const std::string& program_name);
// cubin_async(...).get().
std::shared_ptr<const std::string> cached_cubin(const std::string& source, const std::vector<NvrtcHeader>& headers,
                                                int arch, const std::string& program_name);
KernelCacheStats kernel_cache_stats();
// Drops the in-memory cache (tests use it to reach the disk cache).
void kernel_cache_forget_memory();

// The disk format, exposed for tests. read_cache_file returns the payload
// only when the file is complete and intact and was written for `key`.
std::optional<std::string> read_cache_file(const std::string& path, const std::string& key);
// Writes atomically; returns false (file untouched) when it cannot.
bool write_cache_file(const std::string& path, const std::string& key, const std::string& payload);

}  // namespace kiln::cuda
