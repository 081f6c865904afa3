// The attention row kernel: f32, and f16/bf16 on GPUs without mma.sync
// (older than sm_80). One warp per query row; lanes split the head dim, and
// the flash kernel's online softmax runs over the keys one at a time. Fully
// masked rows give zeros (Note [Fully masked rows], attention_ops.cpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/attention_indexing.cuh"
#include "backends/cuda/block_reduce.cuh"
#include "backends/cuda/vector_io.cuh"
#include "ir/dtype.h"

namespace kiln::cuda {

namespace {

constexpr int kRowWarps = 4;
constexpr int kPerLane = static_cast<int>(kAttentionMaxHeadDim / 32);

// Element i of a T array, as float.
template <typename T>
__device__ float element(const void* p, int64_t i) {
  return to_float(static_cast<const T*>(p)[i]);
}

template <typename T>
__global__ void __launch_bounds__(kRowWarps * 32) attention_rows(const __grid_constant__ AttentionArgs a,
                                                                  int64_t num_rows) {
  const int64_t row_id = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  if (row_id >= num_rows) return;  // the whole warp leaves together
  const int lane = threadIdx.x % 32;
  const int64_t batch = row_id / a.L, i = row_id % a.L;
  const Offsets off = batch_offsets(a, batch);
  const int64_t q0 = off.q + i * a.q_row;
  float qr[kPerLane], acc[kPerLane];
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) {
    const int64_t e = lane + 32 * c;
    qr[c] = e < a.E ? element<T>(a.q, q0 + e) * a.scale : 0.f;
    acc[c] = 0.f;
  }
  float row_max = kNegInf, row_sum = 0.f;
  const int64_t end = a.causal ? (a.S < i + 1 ? a.S : i + 1) : a.S;
  for (int64_t j = 0; j < end; ++j) {
    const int64_t k0 = off.k + j * a.k_row;
    float part = 0.f;
#pragma unroll
    for (int c = 0; c < kPerLane; ++c) {
      const int64_t e = lane + 32 * c;
      if (e < a.E) part += qr[c] * element<T>(a.k, k0 + e);
    }
    float x = warp_reduce(part, SumOp{});  // the same bits in every lane
    if (a.mask != nullptr) {
      const int64_t mo = off.m + i * a.m_row + j * a.m_col;
      if (a.mask_is_bool)
        x = static_cast<const bool*>(a.mask)[mo] ? x : kNegInf;
      else
        x += element<T>(a.mask, mo);
    }
    if (x == kNegInf) continue;  // uniform across the warp
    const float new_max = fmaxf(row_max, x);
    const float correction = expf(row_max - new_max), p = expf(x - new_max);
    row_sum = row_sum * correction + p;
    const int64_t v0 = off.v + j * a.v_row;
#pragma unroll
    for (int c = 0; c < kPerLane; ++c) {
      const int64_t e = lane + 32 * c;
      acc[c] = acc[c] * correction + (e < a.Ev ? p * element<T>(a.v, v0 + e) : 0.f);
    }
    row_max = new_max;
  }
  const float inv = row_sum > 0.f ? 1.f / row_sum : 0.f;
  const int64_t out0 = output_base(a, batch) + i * a.out_heads * a.Ev;
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) {
    const int64_t e = lane + 32 * c;
    if (e < a.Ev) static_cast<T*>(a.out)[out0 + e] = from_float<T>(acc[c] * inv);
  }
}

}  // namespace

cudaError_t launch_attention_rows(const AttentionArgs& a, int64_t rows, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((rows + kRowWarps - 1) / kRowWarps);
  switch (static_cast<DType>(a.dtype)) {
    case DType::f32: attention_rows<float><<<blocks, kRowWarps * 32, 0, stream>>>(a, rows); break;
    case DType::f16: attention_rows<__half><<<blocks, kRowWarps * 32, 0, stream>>>(a, rows); break;
    default: attention_rows<__nv_bfloat16><<<blocks, kRowWarps * 32, 0, stream>>>(a, rows); break;
  }
  return cudaGetLastError();
}

}  // namespace kiln::cuda
