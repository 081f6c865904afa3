// Kernels of bench/l2_prefetch_probe.py: L2 prefetches of a weight a product will stream next, issued by a
// few threads through the bulk (TMA) prefetch of sm_90 (cp.async.bulk.prefetch.L2), which fills L2 without
// holding registers or shared memory, and returns at once.
#include <cstdint>

// For each of `rows` rows of `row_bytes` bytes at w, split into `parts` equal pieces, prefetches the first
// `bytes` bytes of every piece (parts = 1: each row's start; parts = S: each of S contiguous K ranges).
// `evict_last` marks the lines evict-last in L2, so the product streaming the current weight through L2
// (evict-normal) does not push them out first. `bytes` is a multiple of 16; pieces start 16-byte aligned.
extern "C" __global__ void prefetch_rows(const char* w, int row_bytes, int rows, int parts, int bytes, int evict_last) {
  const int part_bytes = row_bytes / parts;
  const int n = rows * parts;
  uint64_t policy = 0;
  if (evict_last) asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const char* p = w + static_cast<int64_t>(i / parts) * row_bytes + static_cast<int64_t>(i % parts) * part_bytes;
    if (evict_last)
      asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(p), "r"(bytes), "l"(policy)
                   : "memory");
    else
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
  }
}
