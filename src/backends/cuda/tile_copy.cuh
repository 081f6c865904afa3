// Moving tiles into and out of shared memory on sm_80+ (the tensor-core
// kernels): asynchronous global->shared copies (cp.async, so the next tile
// loads while the current one is computed on) and ldmatrix, which hands each
// lane its mma.sync fragment of four 8x8 16-bit matrices in one instruction.
// Below sm_80 these trap: the kernels using them are never launched there.
#pragma once

#include <cstdint>

namespace kiln::cuda {

__device__ inline uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes from global `src` to shared `dst` (both 16-byte aligned), or 16
// zero bytes when `valid` is false (then nothing is read from `src`).
__device__ inline void copy_16_async(void* dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 16 : 0));
#endif
}

// Closes the group of copies issued since the last commit.
__device__ inline void commit_copies() {
#if !(defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800)
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most `Pending` committed groups are still in flight.
template <int Pending>
__device__ inline void wait_copies() {
#if !(defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
#endif
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i
// (16-byte aligned, as shared-window addresses), and r[i] is this lane's part
// of matrix i: row lane/4, columns 2(lane%4) and 2(lane%4)+1 (with Transposed,
// those of the transpose). A kernel that computes its addresses as a base plus
// constants lets ptxas fold the constants into the instruction.
template <bool Transposed>
__device__ inline void load_matrices_at(uint32_t (&r)[4], uint32_t shared_row_address) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  if constexpr (Transposed)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_row_address));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_row_address));
#endif
}

// The same, from a generic pointer into shared memory.
template <bool Transposed>
__device__ inline void load_matrices(uint32_t (&r)[4], const void* row_address) {
  load_matrices_at<Transposed>(r, shared_address(row_address));
}

}  // namespace kiln::cuda
