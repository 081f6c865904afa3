// The boundary between attention_lowering.cpp (host) and attention_kernels.cu
// (device): one plain argument struct, filled per call from the views.
// Batch dims are the output's (all but the last two); each operand gives its
// stride along each of them (0 where it broadcasts), and k and v a head group
// size for grouped-query attention (query head h reads head h / group).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/launch.h"

namespace kiln::cuda {

struct AttentionArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* mask = nullptr;  // nullptr: no mask
  void* out = nullptr;         // contiguous [batch..., L, Ev], or [batch..., L, H, Ev] when out_heads = H > 1
  int dtype = 0;               // kiln::DType of q, k, v and out: f16, bf16 or f32
  bool mask_is_bool = false;   // else additive, in q's dtype
  bool causal = false;
  float scale = 1.0f;
  int64_t L = 0, S = 0, E = 0, Ev = 0;
  int nbatch = 0;
  int64_t batch_dims[kMaxRank] = {};
  int64_t q_batch[kMaxRank] = {}, k_batch[kMaxRank] = {}, v_batch[kMaxRank] = {}, m_batch[kMaxRank] = {};
  int64_t k_group = 1, v_group = 1;  // along the last batch dim (heads)
  int64_t q_row = 0, k_row = 0, v_row = 0;  // the head dim itself has stride 1
  int64_t m_row = 0, m_col = 0;
  int64_t out_heads = 1;  // heads_last: batch entry b's rows start at (b / H) L H Ev + (b % H) Ev, H Ev apart
  bool k_vec = false, v_vec = false;  // rows can be read 16 bytes at a time
  bool q_pairs = false;               // q's rows can be read 4 bytes (two elements) at a time
  bool out_vec = false;               // out's rows can be written 16 bytes at a time
  bool tensor_cores = false;          // the device has mma.sync for f16/bf16 (sm_80 or newer)
  bool heavy_first = false;           // set by launch_attention (Note [Heavy blocks first], attention_kernels.cu)
};

// The largest head dim (E and Ev) the kernels take.
inline constexpr int64_t kAttentionMaxHeadDim = 128;

// f16/bf16: flash attention on tensor cores (mma.sync, f32 accumulation);
// f32, or no tensor_cores: one warp per query row. Neither writes the [L, S] scores anywhere.
cudaError_t launch_attention(const AttentionArgs& args, cudaStream_t stream);

}  // namespace kiln::cuda
