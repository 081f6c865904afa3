// What both attention kernels (attention_kernels.cu, attention_rows.cu) need:
// where a batch entry's q, k, v, mask and output rows start, and the row
// kernel's launch, which launch_attention calls.
#pragma once

#include <cstdint>

#include "backends/cuda/attention_launch.h"

namespace kiln::cuda {

constexpr float kNegInf = -__builtin_huge_valf();

struct Offsets {
  int64_t q = 0, k = 0, v = 0, m = 0;
};

// n / d for n >= 0, d >= 1: in 32 bits when both fit. A 64-bit division is a long dependent
// instruction sequence on the GPU, and these precede a block's first load.
__device__ inline int64_t quotient(int64_t n, int64_t d) {
  if (((n | d) >> 31) == 0) return static_cast<uint32_t>(n) / static_cast<uint32_t>(d);
  return n / d;
}

__device__ inline Offsets batch_offsets(const AttentionArgs& a, int64_t b) {
  Offsets o;
  for (int d = a.nbatch - 1; d >= 0; --d) {
    const int64_t n = a.batch_dims[d];
    const int64_t rest = quotient(b, n), i = b - rest * n;
    b = rest;
    const bool heads = d == a.nbatch - 1;
    o.q += i * a.q_batch[d];
    o.k += (heads ? quotient(i, a.k_group) : i) * a.k_batch[d];
    o.v += (heads ? quotient(i, a.v_group) : i) * a.v_batch[d];
    o.m += i * a.m_batch[d];
  }
  return o;
}

// Where batch entry b's output rows start (AttentionOutputLayout in ops/attention_shape.h).
__device__ inline int64_t output_base(const AttentionArgs& a, int64_t b) {
  const int64_t group = quotient(b, a.out_heads);
  return group * a.L * a.out_heads * a.Ev + (b - group * a.out_heads) * a.Ev;
}

// f32, or f16/bf16 without tensor cores: one warp per query row of the `rows` (all batch entries').
cudaError_t launch_attention_rows(const AttentionArgs& a, int64_t rows, cudaStream_t stream);

}  // namespace kiln::cuda
