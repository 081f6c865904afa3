// Kernels of bench/gemm_order_probe.py: fp16 products y = x W^T with few rows of x on tensor cores
// (mma.sync m16n8k16, f32 accumulation), to learn which summation order cuBLAS's skinny GEMM uses
// (split-K partials of a chosen split) and how fast kernels that keep such an order stream the weight.
#include <cuda_fp16.h>
#include <stdint.h>

__device__ __forceinline__ void mma16816(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ uint32_t ld32(const __half* p) { return *reinterpret_cast<const uint32_t*>(p); }

// The split that K tile `i` (of `tiles`) belongs to. mode 1: round-robin; mode 2: contiguous runs of
// ceil(tiles / S) tiles (the last split shorter); mode 3: contiguous runs as even as can be, the first
// tiles % S splits one tile longer.
__device__ __forceinline__ int split_of_tile(int i, int tiles, int S, int mode) {
  if (mode == 1) return i % S;
  if (mode == 2) {
    int run = (tiles + S - 1) / S;
    return i / run;
  }
  int q = tiles / S, r = tiles % S, boundary = r * (q + 1);
  return i < boundary ? i / (q + 1) : r + (i - boundary) / q;
}

// grid (N/16, S), block 32. mode 0: split s covers a contiguous K/S range; modes 1-3: K tiles of
// width `tile` dealt to splits by split_of_tile. part[s][m][n].
extern "C" __global__ void probe_partials(const __half* W, const __half* x, float* part, int N, int K, int M,
                                          int S, int mode, int tile) {
  int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
  int n0 = blockIdx.x * 16, s = blockIdx.y;
  float c[4] = {0.f, 0.f, 0.f, 0.f};
  const __half* r0 = W + (size_t)(n0 + g) * K;
  const __half* r8 = W + (size_t)(n0 + g + 8) * K;
  const __half* xr = x + (size_t)g * K;
  for (int k = 0; k < K; k += 16) {
    bool mine = mode == 0 ? (k / (K / S)) == s : split_of_tile(k / tile, K / tile, S, mode) == s;
    if (!mine) continue;
    uint32_t a[4] = {ld32(r0 + k + 2 * t), ld32(r8 + k + 2 * t), ld32(r0 + k + 2 * t + 8), ld32(r8 + k + 2 * t + 8)};
    uint32_t b[2] = {0u, 0u};
    if (g < M) { b[0] = ld32(xr + k + 2 * t); b[1] = ld32(xr + k + 2 * t + 8); }
    mma16816(c, a, b);
  }
  int m0 = 2 * t;
  float* p = part + (size_t)s * M * N;
  if (m0 < M) { p[(size_t)m0 * N + n0 + g] = c[0]; p[(size_t)m0 * N + n0 + g + 8] = c[2]; }
  if (m0 + 1 < M) { p[(size_t)(m0 + 1) * N + n0 + g] = c[1]; p[(size_t)(m0 + 1) * N + n0 + g + 8] = c[3]; }
}

// ---- split-K, eight warps a block ----
// grid (N/128, S), block 256: 8 warps of 16 W rows each; split s covers the
// contiguous K range [s*K/S, (s+1)*K/S) in 64-wide tiles through a cp.async
// pipeline of STAGES. Partials go to ws[s][m][n]; the last CTA of a row block
// to finish sums them in split order (fp32) and writes y[m][n] in fp16.
constexpr int kRows = 128, kTileK = 64, kXPad = 72;

__device__ __forceinline__ void cp16(void* smem, const void* gmem, bool valid) {
  uint32_t sa = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  int src = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa), "l"(gmem), "r"(src));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x4(uint32_t* r, const void* smem) {
  uint32_t sa = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(sa));
}

// One 64-wide K tile into the warp's accumulators, k16 steps in ascending order: A from the swizzled
// W tile in shared memory (ldmatrix x4 gives a0 rows 0-7 k 0-7, a1 rows 8-15 k 0-7, a2 rows 0-7 k 8-15,
// a3 rows 8-15 k 8-15; `arow` is this lane's row), B from x's row of this lane's group (`dx`).
__device__ __forceinline__ void tile_product(float* c, const __half* dw, const __half* dx, int arow, int lane, int t) {
#pragma unroll
  for (int kk = 0; kk < kTileK; kk += 16) {
    uint32_t a[4];
    int ch = (kk >> 3) + (lane >> 4);
    ldsm_x4(a, dw + arow * kTileK + ((ch ^ (arow & 7)) << 3));
    uint32_t b[2] = {ld32(dx + kk + 2 * t), ld32(dx + kk + 2 * t + 8)};
    mma16816(c, a, b);
  }
}

template <int STAGES>
__device__ __forceinline__ void split_k_body(const __half* __restrict__ W, const __half* __restrict__ x,
                                            float* __restrict__ ws, unsigned* __restrict__ counters,
                                            __half* __restrict__ y, int N, int K, int M, int S) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __half* sw = reinterpret_cast<__half*>(smem_raw);                    // STAGES x 128 x 64, swizzled
  __half* sx = sw + STAGES * kRows * kTileK;                            // STAGES x 8 x 72
  int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  int n0 = blockIdx.x * kRows, s = blockIdx.y;
  int kc = K / S, kbeg = s * kc, tiles = kc / kTileK;

  auto load = [&](int stage, int tile) {
    int k0 = kbeg + tile * kTileK;
    __half* dw = sw + stage * kRows * kTileK;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      int c = tid + i * 256, row = c >> 3, ch = c & 7;
      cp16(dw + row * kTileK + ((ch ^ (row & 7)) << 3), W + (size_t)(n0 + row) * K + k0 + ch * 8, true);
    }
    if (tid < 64) {
      int row = tid >> 3, ch = tid & 7;
      bool valid = row < M;
      cp16(sx + stage * 8 * kXPad + row * kXPad + ch * 8, x + (size_t)(valid ? row : 0) * K + k0 + ch * 8, valid);
    }
  };

#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < tiles) load(st, st);
    cp_commit();
  }
  float c[4] = {0.f, 0.f, 0.f, 0.f};
  int arow = warp * 16 + (lane & 15);
  for (int tile = 0; tile < tiles; ++tile) {
    cp_wait<STAGES - 2>();
    __syncthreads();
    int next = tile + STAGES - 1;
    if (next < tiles) load(next % STAGES, next);
    cp_commit();
    const __half* dw = sw + (tile % STAGES) * kRows * kTileK;
    const __half* dx = sx + (tile % STAGES) * 8 * kXPad + g * kXPad;
    tile_product(c, dw, dx, arow, lane, t);
  }
  cp_wait<0>();
  int m0 = 2 * t, nr = n0 + warp * 16 + g;
  float* p = ws + (size_t)s * M * N;
  if (m0 < M) { p[(size_t)m0 * N + nr] = c[0]; p[(size_t)m0 * N + nr + 8] = c[2]; }
  if (m0 + 1 < M) { p[(size_t)(m0 + 1) * N + nr] = c[1]; p[(size_t)(m0 + 1) * N + nr + 8] = c[3]; }
  __threadfence();
  __syncthreads();
  __shared__ unsigned last;
  if (tid == 0) last = atomicAdd(&counters[blockIdx.x], 1u) == static_cast<unsigned>(S - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int i = tid; i < M * kRows; i += 256) {
    int m = i / kRows, n = n0 + i % kRows;
    float acc = 0.f;
    for (int q = 0; q < S; ++q) acc += __ldcg(ws + ((size_t)q * M + m) * N + n);
    y[(size_t)m * N + n] = __float2half_rn(acc);
  }
  if (tid == 0) counters[blockIdx.x] = 0u;
}

extern "C" __global__ void __launch_bounds__(256) split_k_pipelined(const __half* W, const __half* x, float* ws,
                                                                    unsigned* cnt, __half* y, int N, int K, int M,
                                                                    int S) {
  split_k_body<4>(W, x, ws, cnt, y, N, K, M, S);
}

// ---- one warp per 16 W rows, the whole K in order (cuBLAS's order when it does not split K) ----
// grid N/16, block 32. Each warp streams its 16 rows (and x) through a
// D-stage cp.async pipeline of 64-wide K tiles and writes y in fp16.
template <int D>
__device__ __forceinline__ void rows16_body(const __half* __restrict__ W, const __half* __restrict__ x,
                                            __half* __restrict__ y, int N, int K, int M) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __half* sw = reinterpret_cast<__half*>(smem_raw);  // D x 16 x 64, swizzled
  __half* sx = sw + D * 16 * kTileK;                 // D x 8 x 72
  int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
  int n0 = blockIdx.x * 16, tiles = K / kTileK;
  auto load = [&](int stage, int tile) {
    int k0 = tile * kTileK;
    __half* dw = sw + stage * 16 * kTileK;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      int c = lane + i * 32, row = c >> 3, ch = c & 7;
      cp16(dw + row * kTileK + ((ch ^ (row & 7)) << 3), W + (size_t)(n0 + row) * K + k0 + ch * 8, true);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      int c = lane + i * 32, row = c >> 3, ch = c & 7;
      bool valid = row < M;
      cp16(sx + stage * 8 * kXPad + row * kXPad + ch * 8, x + (size_t)(valid ? row : 0) * K + k0 + ch * 8, valid);
    }
  };
#pragma unroll
  for (int st = 0; st < D - 1; ++st) {
    if (st < tiles) load(st, st);
    cp_commit();
  }
  float c[4] = {0.f, 0.f, 0.f, 0.f};
  int arow = lane & 15;
  for (int tile = 0; tile < tiles; ++tile) {
    cp_wait<D - 2>();
    __syncwarp();
    int next = tile + D - 1;
    if (next < tiles) load(next % D, next);
    cp_commit();
    const __half* dw = sw + (tile % D) * 16 * kTileK;
    const __half* dx = sx + (tile % D) * 8 * kXPad + g * kXPad;
    tile_product(c, dw, dx, arow, lane, t);
    __syncwarp();
  }
  cp_wait<0>();
  int m0 = 2 * t, nr = n0 + g;
  if (m0 < M) { y[(size_t)m0 * N + nr] = __float2half_rn(c[0]); y[(size_t)m0 * N + nr + 8] = __float2half_rn(c[2]); }
  if (m0 + 1 < M) { y[(size_t)(m0 + 1) * N + nr] = __float2half_rn(c[1]); y[(size_t)(m0 + 1) * N + nr + 8] = __float2half_rn(c[3]); }
}
extern "C" __global__ void __launch_bounds__(32) rows16_d8(const __half* W, const __half* x, __half* y, int N, int K, int M) {
  rows16_body<8>(W, x, y, N, K, M);
}
extern "C" __global__ void __launch_bounds__(32) rows16_d12(const __half* W, const __half* x, __half* y, int N, int K, int M) {
  rows16_body<12>(W, x, y, N, K, M);
}
extern "C" __global__ void __launch_bounds__(32) rows16_d16(const __half* W, const __half* x, __half* y, int N, int K, int M) {
  rows16_body<16>(W, x, y, N, K, M);
}
