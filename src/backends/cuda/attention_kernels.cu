// CUDA attention: the flash kernel and launch_attention, which picks it or the
// row kernel. Neither materializes the [L, S] score matrix.
//
// f16/bf16 (flash attention): a block owns 64 query rows of one batch entry,
// 16 rows per warp; with kSplit = 2 (grids smaller than one wave of the GPU)
// it has 8 warps, two per 16 rows, and each takes half of every key tile, so
// a warp's serial chain per tile is half as long; the two halves' softmax
// states merge through shared memory at the end (Note [Split keys]). Q stays
// in registers as mma.sync A
// fragments; key/value tiles of 64 rows go through shared memory in two
// stages (cp.async loads the next tile while this one is used; ldmatrix
// reads the mma fragments out of it). For each
// tile a warp computes its 16x64 scores on tensor cores
// (mma.sync.m16n8k16, f32 accumulation), applies scale, causal and mask in
// registers, updates the running row max and sum (online softmax, in log2
// units), and adds P V (P rounded to the input dtype, as A fragments made
// straight from the score accumulators) into f32 output accumulators. Head
// dims are padded with zeros to the kernel's D (32, 64 or 128). The output
// leaves through shared memory in 16-byte row pieces where its rows allow.
//
// f32 (and f16/bf16 on GPUs older than sm_80) take the row kernel
// (attention_rows.cu). Fully masked rows give zeros (Note [Fully masked
// rows], attention_ops.cpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cstdint>

#include "backends/cuda/attention_indexing.cuh"
#include "backends/cuda/attention_launch.h"
#include "backends/cuda/multiprocessors.h"
#include "backends/cuda/tile_copy.cuh"
#include "ir/dtype.h"

namespace kiln::cuda {

namespace {

constexpr int kBlockM = 64;  // query rows per block
constexpr int kBlockN = 64;  // keys per tile
constexpr int kThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;
// ---- f16 / bf16 ------------------------------------------------------------------

template <typename T>
struct Half;

template <>
struct Half<__half> {
  static __device__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    __trap();  // never launched: launch_attention takes the row kernel below sm_80
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
  }
  static __device__ uint32_t pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ float to_float(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }
  static __device__ uint16_t from_float(float x) { return __half_as_ushort(__float2half_rn(x)); }
};

template <>
struct Half<__nv_bfloat16> {
  static __device__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    __trap();  // never launched: launch_attention takes the row kernel below sm_80
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
  }
  static __device__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ float to_float(uint16_t bits) { return __bfloat162float(__ushort_as_bfloat16(bits)); }
  static __device__ uint16_t from_float(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
};

// Rows [n0, n0 + kBlockN) of a [S, cols] operand into a zero-padded [kBlockN, D]
// tile: asynchronously (cp.async; the caller commits and waits) when `vec`
// (cols % 8 == 0 and every row 16-byte aligned), else with plain stores. A
// thread copies the same 16-byte column of every kRowsPerPass-th row, so its
// offsets are one product and a running sum.
template <int D, int kThreadCount>
__device__ void load_tile(uint16_t (*dst)[D + 8], const uint16_t* src, int64_t row_stride, int n0, int S,
                          int cols, bool vec) {
  if (vec) {
    constexpr int kChunks = D / 8, kRowsPerPass = kThreadCount / kChunks;
    static_assert(kBlockN % kRowsPerPass == 0);
    const int r0 = threadIdx.x / kChunks, c = (threadIdx.x % kChunks) * 8;
    int64_t offset = (n0 + r0) * row_stride + c;
    const int64_t step = kRowsPerPass * row_stride;
#pragma unroll
    for (int pass = 0; pass < kBlockN / kRowsPerPass; ++pass, offset += step) {
      const int r = r0 + pass * kRowsPerPass;
      const bool valid = n0 + r < S && c < cols;
      copy_16_async(&dst[r][c], valid ? src + offset : src, valid);
    }
  } else {
    for (int i = threadIdx.x; i < kBlockN * D; i += kThreadCount) {
      const int r = i / D, c = i % D;
      dst[r][c] = (n0 + r < S && c < cols) ? src[(n0 + r) * row_stride + c] : uint16_t{0};
    }
  }
}

// Shared memory of flash_attention<T, D, ...>: two stages of a key and a value tile.
template <int D>
constexpr int kFlashSharedBytes = 2 * 2 * kBlockN * (D + 8) * static_cast<int>(sizeof(uint16_t));

// Note [Split keys]
// At batch 1, GPT-2 and BERT give 24 blocks to a 132-SM GPU: one warp per
// scheduler, so every dependent instruction's latency is exposed (ncu on the
// H200, 2026-12-03: 8.1 cycles per issued instruction, 10.5 us per launch
// against cuDNN's 4.3). With kSplit = 2, warp w takes query rows
// 16 (w % 4).. and keys [32 (w / 4), +32) of each 64-key tile, keeping its
// own running maximum, sum and output. At the end the second half's state
// goes to shared memory (the tile buffers, free by then) and the first half
// merges it: with M the larger maximum, sum = sum_a 2^(m_a - M) + sum_b
// 2^(m_b - M), and the outputs alike. A row that saw no key in either half
// (M = -inf) gets zeros, as before.

// Note [Heavy blocks first]
// Under causality a block's work grows with its first query row: at L = 128
// the second 64-row block of a head reads two key tiles, the first one. The
// GPU starts blocks roughly in index order, so when the grid is over one wave
// (GPT-2 at batch 32: 768 blocks, 5 per SM on 132 SMs) and the heavy and light
// blocks alternate, the last blocks to start are heavy ones and the kernel
// takes three tiles' time instead of two. With heavy_first, block indices run
// over the batch entries of the last query block first, then of the one
// before. A head's blocks then no longer run side by side, so its key and value
// rows are read once per block from L2 instead of by neighbours at the same
// time; launch_attention asks for it only while all keys and values together
// fit well inside L2 (kHeavyFirstBytes).

// Floats per lane of the merge: the output accumulators, two maxima, two sums.
template <int D>
constexpr int kMergeFloats = D / 2 + 4;

// Blocks per SM that ptxas keeps registers for (split grids are under one block per SM). At D <= 64, 5
// (96 registers, against 118 unbounded, a few spilled to L1): at batch 32 GPT-2's 768 blocks then take
// 660 SM slots at once instead of 528, which with Note [Heavy blocks first] ends the kernel after two
// tiles' time instead of three. At D = 128, 3 (168 registers). launch_flash_d asks for the shared
// memory to match.
template <int D, int kSplit>
constexpr int kMinBlocks = kSplit > 1 ? 1 : D <= 64 ? 5 : 3;

template <typename T, int D, bool kMask, int kSplit>
__global__ void __launch_bounds__(kThreads * kSplit, (kMinBlocks<D, kSplit>)) flash_attention(const __grid_constant__ AttentionArgs a) {
  using H = Half<T>;
  constexpr int kThreadCount = kThreads * kSplit;
  constexpr int kKeys = kBlockN / kSplit;  // keys of each tile this warp takes
  constexpr int kGroups = kKeys / 8;        // in 8-key groups
  static_assert(kSplit == 1 || kMergeFloats<D> * kThreads * 4 <= kFlashSharedBytes<D>);
  // Two stages: the next key/value tiles load (cp.async) while this one is used.
  extern __shared__ __align__(16) uint16_t shared[];
  using Tile = uint16_t (*)[D + 8];
  auto key_tile = [&](int stage) { return reinterpret_cast<Tile>(shared + (2 * stage) * kBlockN * (D + 8)); };
  auto value_tile = [&](int stage) { return reinterpret_cast<Tile>(shared + (2 * stage + 1) * kBlockN * (D + 8)); };

  // L and S fit in int (launch_attention checks): row and key indices are 32-bit, offsets 64-bit.
  const int L = static_cast<int>(a.L), S = static_cast<int>(a.S);
  const int E = static_cast<int>(a.E), Ev = static_cast<int>(a.Ev);  // at most kAttentionMaxHeadDim
  const uint32_t m_blocks = (L + kBlockM - 1) / kBlockM;
  uint32_t batch, m_block;
  if (a.heavy_first) {  // Note [Heavy blocks first]
    const uint32_t batches = gridDim.x / m_blocks, rank = blockIdx.x / batches;
    batch = blockIdx.x - rank * batches;
    m_block = m_blocks - 1 - rank;
  } else {
    batch = blockIdx.x / m_blocks;
    m_block = blockIdx.x - batch * m_blocks;
  }
  const int m0 = static_cast<int>(m_block) * kBlockM;
  const Offsets off = batch_offsets(a, batch);
  const uint16_t* q = static_cast<const uint16_t*>(a.q) + off.q;
  const uint16_t* k = static_cast<const uint16_t*>(a.k) + off.k;
  const uint16_t* v = static_cast<const uint16_t*>(a.v) + off.v;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;  // mma fragment coordinates: row group, thread in group
  const int row_warp = warp % 4, half = warp / 4;  // half: which keys of each tile (Note [Split keys])
  const int warp_m0 = m0 + row_warp * 16;
  const int key0 = half * kKeys;  // this warp's first key within a tile
  // ldmatrix row addresses (bytes in the shared window): the stage's tile base plus this lane's row
  // and column (keys: row lane % 8, 8-column group lane / 8; values, transposed: key lane % 16,
  // 8-column group lane / 16) plus a constant per fragment.
  constexpr int kRowBytes = (D + 8) * 2, kTileBytes = kBlockN * kRowBytes;
  const uint32_t shared_base = shared_address(shared);
  const uint32_t k_lane = (lane & 7) * kRowBytes + (lane >> 3) * 16;
  const uint32_t v_lane = (lane & 15) * kRowBytes + (lane >> 4) * 16;
  const int rows[2] = {warp_m0 + g, warp_m0 + g + 8};

  // The first key/value tiles start loading (cp.async) before Q is read, so the two latencies overlap:
  // at small grids (GPT-2 and BERT at batch 1: 24 blocks) a block's latency is the kernel's.
  load_tile<D, kThreadCount>(key_tile(0), k, a.k_row, 0, S, E, a.k_vec);
  load_tile<D, kThreadCount>(value_tile(0), v, a.v_row, 0, S, Ev, a.v_vec);
  commit_copies();

  // Q as A fragments (16 x 16 per k-step), read once from global memory: 4-byte pairs at constant
  // offsets from two row pointers when q_pairs (every even column of GPT-2's and BERT's projections),
  // else one element at a time.
  uint32_t qf[D / 16][4];
  const uint16_t* q_rows[2] = {q + rows[0] * a.q_row, q + rows[1] * a.q_row};
  const bool q_in[2] = {rows[0] < L, rows[1] < L};
  if (a.q_pairs) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = i & 1, col = kk * 16 + 2 * t + 8 * (i >> 1);
        qf[kk][i] = q_in[r] && col < E ? *reinterpret_cast<const uint32_t*>(q_rows[r] + col) : 0u;
      }
  } else {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = i & 1, col = kk * 16 + 2 * t + 8 * (i >> 1);
        const uint32_t lo = q_in[r] && col < E ? q_rows[r][col] : 0u;
        const uint32_t hi = q_in[r] && col + 1 < E ? q_rows[r][col + 1] : 0u;
        qf[kk][i] = lo | (hi << 16);
      }
  }

  float o[D / 8][4];
#pragma unroll
  for (int d = 0; d < D / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
  float row_max[2] = {kNegInf, kNegInf}, row_sum[2] = {0.f, 0.f};  // row_sum: this thread's part
  const float scale_log2 = a.scale * kLog2e;
  // Under causality no row of this block sees keys at or past m0 + kBlockM.
  const int n_end = a.causal ? (S < m0 + kBlockM ? S : m0 + kBlockM) : S;

  int stage = 0;
  for (int n0 = 0; n0 < n_end; n0 += kBlockN, stage ^= 1) {
    // The other stage was last read in the previous iteration, before its closing barrier.
    if (n0 + kBlockN < n_end) {
      load_tile<D, kThreadCount>(key_tile(stage ^ 1), k, a.k_row, n0 + kBlockN, S, E, a.k_vec);
      load_tile<D, kThreadCount>(value_tile(stage ^ 1), v, a.v_row, n0 + kBlockN, S, Ev, a.v_vec);
    }
    commit_copies();
    wait_copies<1>();  // this stage's copies are done (the next stage's may be in flight)
    __syncthreads();
    // Keys at or past key_end (past S, or under causality past this warp's last row) are masked for
    // every row of the warp: 8-key groups wholly past it skip both products (the checked path below
    // gives their scores -inf, so their P is 0). ViT's 197 keys use 5 of the last tile's 64.
    const int first = n0 + key0;  // this warp's first key
    const int key_end = a.causal && warp_m0 + 16 < S ? warp_m0 + 16 : S;
    const int left = (key_end - first + 7) / 8;  // at most 0 when every key of this warp lies past key_end
    const int groups = left < kGroups ? left : kGroups;
    // A warp whose rows all lie past L, or that has no key before key_end in this tile, has nothing to add.
    if (warp_m0 < L && groups > 0) {
      const uint32_t ks = shared_base + 2 * stage * kTileBytes + k_lane + key0 * kRowBytes;
      const uint32_t vs = shared_base + (2 * stage + 1) * kTileBytes + v_lane + key0 * kRowBytes;

      // S = Q K^T: ldmatrix gives the B fragments of two 16-wide k-steps for 8 keys at once.
      float s[kGroups][4];
#pragma unroll
      for (int j = 0; j < kGroups; ++j) {
        s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
        if (j >= groups) continue;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk += 2) {
          uint32_t b[4];
          load_matrices_at<false>(b, ks + 8 * j * kRowBytes + kk * 32);
          H::mma(s[j], qf[kk], b[0], b[1]);
          H::mma(s[j], qf[kk + 1], b[2], b[3]);
        }
      }

      // Scale, causal and mask, in log2 units; the tile's row maxima. Only tiles that reach past S,
      // cross this warp's causal diagonal or have a mask check elements (a warp-uniform branch). Without
      // a mask, element (j, e) of row r holds key first + 2t + 8j + (e & 1), which is seen iff that is
      // under both S and (causal) row r + 1: one comparison of a constant with seen[r].
      float tile_max[2] = {row_max[0], row_max[1]};
      const bool checked = kMask || first + kKeys > S || (a.causal && first + kKeys - 1 > warp_m0);
      if (!checked) {
#pragma unroll
        for (int j = 0; j < kGroups; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            s[j][e] *= scale_log2;
            tile_max[e >> 1] = fmaxf(tile_max[e >> 1], s[j][e]);
          }
      } else if constexpr (!kMask) {
        int seen[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) seen[r] = (a.causal && rows[r] + 1 < S ? rows[r] + 1 : S) - (first + 2 * t);
#pragma unroll
        for (int j = 0; j < kGroups; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float x = 8 * j + (e & 1) < seen[e >> 1] ? s[j][e] * scale_log2 : kNegInf;
            s[j][e] = x;
            tile_max[e >> 1] = fmaxf(tile_max[e >> 1], x);
          }
      } else {
#pragma unroll
        for (int j = 0; j < kGroups; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int row = rows[e >> 1], col = first + 8 * j + 2 * t + (e & 1);
            float x = s[j][e] * scale_log2;
            if (col >= S || (a.causal && col > row)) {
              x = kNegInf;
            } else if (row < L) {
              const int64_t mo = off.m + row * a.m_row + col * a.m_col;
              if (a.mask_is_bool) {
                if (!static_cast<const bool*>(a.mask)[mo]) x = kNegInf;
              } else {
                x += H::to_float(static_cast<const uint16_t*>(a.mask)[mo]) * kLog2e;
              }
            }
            s[j][e] = x;
            tile_max[e >> 1] = fmaxf(tile_max[e >> 1], x);
          }
        }
      }
      float base[2], correction[2], tile_sum[2] = {0.f, 0.f};
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
        base[r] = tile_max[r] == kNegInf ? 0.f : tile_max[r];  // nothing seen yet: every p is 0
        correction[r] = exp2f(row_max[r] - base[r]);
        row_max[r] = tile_max[r];
      }
#pragma unroll
      for (int j = 0; j < kGroups; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float p = exp2f(s[j][e] - base[e >> 1]);
          s[j][e] = p;
          tile_sum[e >> 1] += p;
        }
#pragma unroll
      for (int r = 0; r < 2; ++r) row_sum[r] = row_sum[r] * correction[r] + tile_sum[r];
#pragma unroll
      for (int d = 0; d < D / 8; ++d) {
        o[d][0] *= correction[0];
        o[d][1] *= correction[0];
        o[d][2] *= correction[1];
        o[d][3] *= correction[1];
      }

      // O += P V: P's A fragments come from the score accumulators of two 8-key groups.
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) {
        if (2 * kk >= groups) break;
        const uint32_t pa[4] = {H::pack(s[2 * kk][0], s[2 * kk][1]), H::pack(s[2 * kk][2], s[2 * kk][3]),
                                H::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                H::pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
        // V's B fragments, transposed by ldmatrix: keys kk*16.. (two halves of 8) by two 8-wide column groups.
#pragma unroll
        for (int d = 0; d < D / 8; d += 2) {
          uint32_t b[4];
          load_matrices_at<true>(b, vs + kk * 16 * kRowBytes + d * 16);
          H::mma(o[d], pa, b[0], b[1]);
          H::mma(o[d + 1], pa, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this stage before it is loaded again
  }

  // With no key (S = 0) the loop never ran: the first tiles' zero fill may still be landing where the
  // merge below writes. Every thread waits for its own copies, then for everyone's (n_end is uniform).
  wait_copies<0>();
  if (n_end <= 0) __syncthreads();
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
  }
  if constexpr (kSplit > 1) {
    // Note [Split keys]: the second half hands its state over; [float][row warp, lane], no bank conflicts.
    float* merge = reinterpret_cast<float*>(shared);
    const int slot = row_warp * 32 + lane;
    auto at = [&](int f) -> float& { return merge[f * kThreads + slot]; };
    if (half == 1) {
#pragma unroll
      for (int d = 0; d < D / 8; ++d)
#pragma unroll
        for (int e = 0; e < 4; ++e) at(4 * d + e) = o[d][e];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        at(D / 2 + r) = row_max[r];
        at(D / 2 + 2 + r) = row_sum[r];
      }
    }
    __syncthreads();
    if (half == 1) return;
    float own[2], other[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float m_other = at(D / 2 + r);
      const float m = fmaxf(row_max[r], m_other);
      own[r] = m == kNegInf ? 0.f : exp2f(row_max[r] - m);
      other[r] = m == kNegInf ? 0.f : exp2f(m_other - m);
      row_sum[r] = row_sum[r] * own[r] + at(D / 2 + 2 + r) * other[r];
    }
#pragma unroll
    for (int d = 0; d < D / 8; ++d)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[d][e] = o[d][e] * own[e >> 1] + at(4 * d + e) * other[e >> 1];
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) inv[r] = row_sum[r] > 0.f ? 1.f / row_sum[r] : 0.f;
  uint16_t* out = static_cast<uint16_t*>(a.out) + output_base(a, batch);
  const int64_t out_row = a.out_heads * a.Ev;
  if (a.out_vec) {
    // The warp's 16 rows go through shared memory (value_tile(1): no warp reads a tile any more, and the
    // merge above stays below it) and leave in 16-byte row pieces instead of scattered 2-byte stores.
    static_assert(kMergeFloats<D> * kThreads * 4 <= 3 * kBlockN * (D + 8) * 2);
    const Tile staged = value_tile(1) + row_warp * 16;
#pragma unroll
    for (int d = 0; d < D / 8; ++d) {
      *reinterpret_cast<uint32_t*>(&staged[g][8 * d + 2 * t]) = H::pack(o[d][0] * inv[0], o[d][1] * inv[0]);
      *reinterpret_cast<uint32_t*>(&staged[g + 8][8 * d + 2 * t]) = H::pack(o[d][2] * inv[1], o[d][3] * inv[1]);
    }
    __syncwarp();
    constexpr int kChunks = D / 8;
#pragma unroll
    for (int i = lane; i < 16 * kChunks; i += 32) {
      const int r = i / kChunks, c = (i % kChunks) * 8;
      if (warp_m0 + r < L && c < Ev)
        *reinterpret_cast<uint4*>(out + (warp_m0 + r) * out_row + c) = *reinterpret_cast<const uint4*>(&staged[r][c]);
    }
    return;
  }
#pragma unroll
  for (int d = 0; d < D / 8; ++d)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = rows[e >> 1];
      const int col = 8 * d + 2 * t + (e & 1);
      if (row < L && col < Ev) out[row * out_row + col] = H::from_float(o[d][e] * inv[e >> 1]);
    }
}

template <typename T, int D, bool kMask, int kSplit>
cudaError_t launch_flash_d(const AttentionArgs& a, int64_t blocks, cudaStream_t stream) {
  constexpr int bytes = kFlashSharedBytes<D>;
  // Once per device (the first call, never a captured one: graphs are captured after it): the opt-in
  // above 48 KiB of dynamic shared memory, and the largest shared memory carveout, so that
  // kMinBlocks blocks fit beside each other (the driver would otherwise size it for fewer).
  static std::atomic<uint64_t> prepared{0};  // a bit per device ordinal below 64
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit == 0 || (prepared.load() & bit) == 0) {
    auto* kernel = flash_attention<T, D, kMask, kSplit>;
    if (bytes > 48 * 1024) {
      if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
          e != cudaSuccess)
        return e;
    }
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                             cudaSharedmemCarveoutMaxShared);
        e != cudaSuccess)
      return e;
    prepared.fetch_or(bit);
  }
  flash_attention<T, D, kMask, kSplit><<<static_cast<unsigned>(blocks), kThreads * kSplit, bytes, stream>>>(a);
  return cudaGetLastError();
}

template <typename T, int kSplit>
cudaError_t launch_flash_split(const AttentionArgs& a, int64_t blocks, cudaStream_t stream) {
  const int64_t head_dim = a.E > a.Ev ? a.E : a.Ev;
  const bool mask = a.mask != nullptr;
  if (head_dim <= 32)
    return mask ? launch_flash_d<T, 32, true, kSplit>(a, blocks, stream) : launch_flash_d<T, 32, false, kSplit>(a, blocks, stream);
  if (head_dim <= 64)
    return mask ? launch_flash_d<T, 64, true, kSplit>(a, blocks, stream) : launch_flash_d<T, 64, false, kSplit>(a, blocks, stream);
  return mask ? launch_flash_d<T, 128, true, kSplit>(a, blocks, stream) : launch_flash_d<T, 128, false, kSplit>(a, blocks, stream);
}

// Note [Split keys]: a grid under one block per multiprocessor splits each tile's keys between two warps.
template <typename T>
cudaError_t launch_flash(const AttentionArgs& a, int64_t blocks, cudaStream_t stream) {
  return blocks < current_multiprocessors() ? launch_flash_split<T, 2>(a, blocks, stream)
                                    : launch_flash_split<T, 1>(a, blocks, stream);
}

}  // namespace

cudaError_t launch_attention(const AttentionArgs& a, cudaStream_t stream) {
  int64_t batches = 1;
  for (int d = 0; d < a.nbatch; ++d) batches *= a.batch_dims[d];
  if (batches == 0 || a.L == 0 || a.Ev == 0) return cudaSuccess;
  if (a.E > kAttentionMaxHeadDim || a.Ev > kAttentionMaxHeadDim) return cudaErrorInvalidValue;
  constexpr int64_t kMaxLength = int64_t{1} << 30;  // row and key indices are 32-bit in the kernels
  if (a.L > kMaxLength || a.S > kMaxLength) return cudaErrorInvalidValue;
  const DType dtype = static_cast<DType>(a.dtype);
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16) return cudaErrorInvalidValue;
  if (dtype == DType::f32 || !a.tensor_cores) return launch_attention_rows(a, batches * a.L, stream);
  const int64_t m_blocks = (a.L + kBlockM - 1) / kBlockM, blocks = batches * m_blocks;
  if (blocks > int64_t{INT32_MAX}) return cudaErrorInvalidValue;  // one grid dimension, 32-bit block indices
  AttentionArgs args = a;
  constexpr int64_t kHeavyFirstBytes = int64_t{16} << 20;  // Note [Heavy blocks first]
  args.heavy_first = a.causal && m_blocks > 1 && batches * a.S * (a.E + a.Ev) * 2 <= kHeavyFirstBytes;
  return dtype == DType::f16 ? launch_flash<__half>(args, blocks, stream)
                             : launch_flash<__nv_bfloat16>(args, blocks, stream);
}

}  // namespace kiln::cuda
