// CUDA kernels for the row-wise normalizations: softmax and log_softmax over
// one axis, layer_norm over the trailing axes, computed in float (double for
// f64) with the row maximum subtracted before exponentiating and the
// variance in two passes, like the CPU reference.
//
// Rows contiguous in the input and the output, a fixed stride apart (after
// collapsing, RowSpace in launch.h), of f16, bf16 or f32 and at most
// kMaxWarpRow long, take the warp kernel: one warp per row, the row held in
// registers, 16-byte vector accesses where sizes and alignment allow,
// warp-shuffle reductions only, and a 72-byte argument (WarpRows) instead of
// RowArgs' 808. Every other row takes the block kernel: one block per row,
// read through its strides.
#include "backends/cuda/block_reduce.cuh"
#include "backends/cuda/multiprocessors.h"
#include "backends/cuda/vector_io.cuh"

namespace kiln::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = 8;           // rows per block of the warp kernel, at most
constexpr int kMaxWarpRow = 2048;   // 64 floats per lane

// x[0..V) = p[0..V) as float: one element, or one 16-byte vector.
template <typename T, int V>
KILN_D void load_items(const T* p, float (&x)[V]) {
  if constexpr (V == 1) x[0] = to_float(*p);
  else load_pack<T>(p, x);
}

template <typename T, int V>
KILN_D void store_items(T* p, const float (&y)[V]) {
  if constexpr (V == 1) *p = from_float<T>(y[0]);
  else store_pack<T>(p, y);
}

// w[0..count) = p[k..k + count) converted to float, for a weight or bias of
// another dtype than the input's: out of line, so that this rare path's
// dtype switch is one copy in the kernel's code instead of one per element.
__noinline__ __device__ void load_params_as_float(const void* p, int dtype, int k, int count, float* w) {
  for (int j = 0; j < count; ++j) w[j] = load_as<float>(p, dtype, k + j);
}

// A weight or bias at row position k: typed (vector) loads when it has the
// input's storage type, else converted element by element.
template <typename T, int V, bool kTyped>
KILN_D void load_param(const void* p, int dtype, int k, float (&w)[V]) {
  if constexpr (kTyped) {
    load_items<T, V>(static_cast<const T*>(p) + k, w);
  } else {
    float converted[V];
    load_params_as_float(p, dtype, k, V, converted);
#pragma unroll
    for (int j = 0; j < V; ++j) w[j] = converted[j];
  }
}

// The warp kernel's argument: `rows` rows of row_len elements, row i at
// in + i * in_row and out + i * out_row. Short kernels between a model's
// matrix products read their argument from a cold constant cache, so the
// fields each warp needs first share the struct's first 64 bytes.
struct WarpRows {
  const void* in = nullptr;
  void* out = nullptr;
  const void* weight = nullptr;  // layer_norm's, or null
  const void* bias = nullptr;
  int64_t rows = 0, in_row = 0, out_row = 0;
  int row_len = 0;
  float eps = 0;
  RowOp op = RowOp::softmax;
  int param_dtype = 0;  // the weight's and the bias's
  int dtype = 0;        // the input's and the output's
};

// One warp per row. Lane l holds accesses v < Items / V at row positions
// (v * 32 + l) * V .. + V; with V > 1 the row length, the rows' offsets and
// the pointers are multiples of V elements (16 bytes), so every access is
// whole and aligned. Two blocks per SM at least: up to 128 registers.
// kLayerNorm picks the op family at compile time (layer_norm, else softmax
// and log_softmax), and kTyped whether layer_norm's weight and bias have the
// input's dtype and 16-byte alignment (typed_params): a kernel holds only
// the code its call runs, which matters because these short kernels start
// with a cold instruction cache between a model's matrix products.
template <typename T, int V, int Items, bool kLayerNorm, bool kTyped>
__global__ void __launch_bounds__(kWarps * 32, 2) warp_row_kernel(const __grid_constant__ WarpRows a) {
  constexpr int kAccesses = Items / V;
  const int n = a.row_len, lane = threadIdx.x % 32;
  const T* in = static_cast<const T*>(a.in);
  T* out = static_cast<T*>(a.out);
  const int warps = blockDim.x / 32;  // rows per block (launch_warp_kernel)
  for (int64_t row = blockIdx.x * static_cast<int64_t>(warps) + threadIdx.x / 32; row < a.rows;
       row += static_cast<int64_t>(gridDim.x) * warps) {
    const int64_t base[2] = {row * a.in_row, row * a.out_row};
    float x[kAccesses][V];
#pragma unroll
    for (int v = 0; v < kAccesses; ++v) {
      const int k = (v * 32 + lane) * V;
      if (k < n) load_items<T, V>(in + base[0] + k, x[v]);
    }
    // Typed 16-byte weight and bias vectors of rows up to 4 vectors a lane are loaded with the row, kept
    // as raw vectors (4 registers each), so one memory round trip serves the whole row instead of a
    // second one after the two reductions.
    constexpr bool kPrefetch = kLayerNorm && kTyped && V > 1 && kAccesses <= 4;
    uint4 w_raw[kPrefetch ? kAccesses : 1], b_raw[kPrefetch ? kAccesses : 1];
    if constexpr (kPrefetch) {
#pragma unroll
      for (int v = 0; v < kAccesses; ++v) {
        const int k = (v * 32 + lane) * V;
        if (k >= n) continue;
        if (a.weight) w_raw[v] = *reinterpret_cast<const uint4*>(static_cast<const T*>(a.weight) + k);
        if (a.bias) b_raw[v] = *reinterpret_cast<const uint4*>(static_cast<const T*>(a.bias) + k);
      }
    }
    // The weight (or bias) at accesses v, as float.
    auto param = [&](const void* p, const uint4 (&raw)[kPrefetch ? kAccesses : 1], int v, int k, float (&w)[V]) {
      if constexpr (kPrefetch)
        unpack<T>(raw[v], w);
      else
        load_param<T, V, kTyped>(p, a.param_dtype, k, w);
    };
    if constexpr (kLayerNorm) {
      float sum = 0;
#pragma unroll
      for (int v = 0; v < kAccesses; ++v)
        if ((v * 32 + lane) * V < n)
#pragma unroll
          for (int j = 0; j < V; ++j) sum += x[v][j];
      const float mean = warp_reduce(sum, SumOp{}) / static_cast<float>(n);
      float sq = 0;
#pragma unroll
      for (int v = 0; v < kAccesses; ++v)
        if ((v * 32 + lane) * V < n)
#pragma unroll
          for (int j = 0; j < V; ++j) sq += (x[v][j] - mean) * (x[v][j] - mean);
      const float var = warp_reduce(sq, SumOp{}) / static_cast<float>(n);
      const float rstd = 1.0f / sm::k_sqrt(var + a.eps);
#pragma unroll
      for (int v = 0; v < kAccesses; ++v) {
        const int k = (v * 32 + lane) * V;
        if (k >= n) continue;
        float y[V], w[V];
#pragma unroll
        for (int j = 0; j < V; ++j) y[j] = (x[v][j] - mean) * rstd;
        if (a.weight) {
          param(a.weight, w_raw, v, k, w);
#pragma unroll
          for (int j = 0; j < V; ++j) y[j] *= w[j];
        }
        if (a.bias) {
          param(a.bias, b_raw, v, k, w);
#pragma unroll
          for (int j = 0; j < V; ++j) y[j] += w[j];
        }
        store_items<T, V>(out + base[1] + k, y);
      }
    } else {
      float mx = -INFINITY;
#pragma unroll
      for (int v = 0; v < kAccesses; ++v)
        if ((v * 32 + lane) * V < n)
#pragma unroll
          for (int j = 0; j < V; ++j) mx = sm::k_maximum(mx, x[v][j]);
      mx = warp_reduce(mx, MaxOp{});
      const float shift = sm::k_isnan(mx) || mx == -INFINITY ? 0.0f : mx;  // all -inf rows give NaN, like torch
      const bool log = a.op == RowOp::log_softmax;
      float sum = 0;
#pragma unroll
      for (int v = 0; v < kAccesses; ++v)
        if ((v * 32 + lane) * V < n)
#pragma unroll
          for (int j = 0; j < V; ++j) {
            x[v][j] -= shift;
            const float e = sm::k_exp(x[v][j]);
            sum += e;
            if (!log) x[v][j] = e;
          }
      sum = warp_reduce(sum, SumOp{});
      const float log_sum = sm::k_log(sum);
#pragma unroll
      for (int v = 0; v < kAccesses; ++v) {
        const int k = (v * 32 + lane) * V;
        if (k >= n) continue;
        float y[V];
#pragma unroll
        for (int j = 0; j < V; ++j) y[j] = log ? x[v][j] - log_sum : x[v][j] / sum;
        store_items<T, V>(out + base[1] + k, y);
      }
    }
  }
}

template <typename C>
__global__ void __launch_bounds__(kThreads) row_kernel(const __grid_constant__ RowArgs a) {
  __shared__ C shared[32];
  const RowSpace& r = a.rows;
  const int64_t n = r.row_len;
  for (int64_t row = blockIdx.x; row < r.rows; row += gridDim.x) {
    const int64_t in_base = offset_of(row, r.kept, r.kept_in);
    const int64_t out_base = offset_of(row, r.kept, r.kept_out);
    auto x_at = [&](int64_t k) { return load_as<C>(a.in, a.dtype, in_base + offset_of(k, r.red, r.red_in)); };
    auto out_at = [&](int64_t k) { return out_base + offset_of(k, r.red, r.red_out); };
    if (a.op == RowOp::layer_norm) {
      C sum = 0;
      for (int64_t k = threadIdx.x; k < n; k += blockDim.x) sum += x_at(k);
      const C mean = block_reduce(sum, SumOp{}, shared) / static_cast<C>(n);
      C sq = 0;
      for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
        C d = x_at(k) - mean;
        sq += d * d;
      }
      const C var = block_reduce(sq, SumOp{}, shared) / static_cast<C>(n);
      const C rstd = C(1) / sm::k_sqrt(var + static_cast<C>(a.eps));
      for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
        C y = (x_at(k) - mean) * rstd;
        if (a.weight) y *= load_as<C>(a.weight, a.param_dtype, offset_of(k, r.red, a.weight_strides));
        if (a.bias) y += load_as<C>(a.bias, a.param_dtype, offset_of(k, r.red, a.bias_strides));
        store_as<C>(a.out, a.dtype, out_at(k), y);
      }
    } else {
      C mx = -INFINITY;
      for (int64_t k = threadIdx.x; k < n; k += blockDim.x) mx = sm::k_maximum(mx, x_at(k));
      mx = block_reduce(mx, MaxOp{}, shared);
      const C shift = sm::k_isnan(mx) || mx == -INFINITY ? C(0) : mx;  // all -inf rows give NaN, like torch
      C sum = 0;
      for (int64_t k = threadIdx.x; k < n; k += blockDim.x) sum += sm::k_exp(x_at(k) - shift);
      sum = block_reduce(sum, SumOp{}, shared);
      const C log_sum = sm::k_log(sum);
      for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
        C d = x_at(k) - shift;
        C y = a.op == RowOp::log_softmax ? d - log_sum : sm::k_exp(d) / sum;
        store_as<C>(a.out, a.dtype, out_at(k), y);
      }
    }
  }
}

template <typename T, int V, bool kLayerNorm, bool kTyped>
void launch_warp_kernel(const WarpRows& a, int items, cudaStream_t s) {
  // kWarps rows per block, fewer when that would leave multiprocessors idle: GPT-2 at batch 1 has 128
  // rows, 16 blocks of 8 rows on a 132-SM GPU, where 128 blocks of one row spread the loads.
  int warps = kWarps;
  const int64_t sms = current_multiprocessors();
  while (warps > 1 && (a.rows + warps - 1) / warps < sms) warps /= 2;
  const int64_t blocks = (a.rows + warps - 1) / warps;
  const unsigned grid = static_cast<unsigned>(blocks > (1 << 20) ? (1 << 20) : blocks);
  const unsigned threads = static_cast<unsigned>(warps * 32);
  switch (items) {
    case 8: warp_row_kernel<T, V, 8, kLayerNorm, kTyped><<<grid, threads, 0, s>>>(a); break;
    case 16: warp_row_kernel<T, V, 16, kLayerNorm, kTyped><<<grid, threads, 0, s>>>(a); break;
    case 32: warp_row_kernel<T, V, 32, kLayerNorm, kTyped><<<grid, threads, 0, s>>>(a); break;
    default: warp_row_kernel<T, V, 64, kLayerNorm, kTyped><<<grid, threads, 0, s>>>(a); break;
  }
}

// Whether layer_norm's weight and bias (where present) have the input's dtype
// and, for vector access, 16-byte aligned pointers: then they are read as the
// row is, else converted element by element.
template <int V>
bool typed_params(const WarpRows& a) {
  auto aligned = [](const void* p) { return V == 1 || reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return a.param_dtype == a.dtype && (!a.weight || aligned(a.weight)) && (!a.bias || aligned(a.bias));
}

template <typename T, int V>
void launch_warp_kernel(const WarpRows& a, int items, cudaStream_t s) {
  if (a.op != RowOp::layer_norm)
    launch_warp_kernel<T, V, false, false>(a, items, s);
  else if (typed_params<V>(a))
    launch_warp_kernel<T, V, true, true>(a, items, s);
  else
    launch_warp_kernel<T, V, true, false>(a, items, s);
}

// The warp kernel for rows that warp_rows_fit: 16-byte vectors when the row
// length, the row strides and both pointers allow, else one element per access.
template <typename T>
void launch_warp_rows(const WarpRows& a, cudaStream_t s) {
  constexpr int P = kPack<T>;
  const bool pack = a.row_len % P == 0 && a.in_row % P == 0 && a.out_row % P == 0 &&
                    reinterpret_cast<uintptr_t>(a.in) % 16 == 0 && reinterpret_cast<uintptr_t>(a.out) % 16 == 0;
  int items = 8;  // row elements per lane, at least V
  while (items * 32 < a.row_len) items *= 2;
  if (pack)
    launch_warp_kernel<T, P>(a, items, s);
  else
    launch_warp_kernel<T, 1>(a, items, s);
}

// Whether the collapsed rows suit the warp kernel: f16, bf16 or f32, at most
// kMaxWarpRow long, contiguous in the input, the output, the weight and the
// bias (one reduced dim of stride 1, or rows of one element), and one stride
// apart (at most one kept dim).
bool warp_rows_fit(const RowArgs& a) {
  const RowSpace& r = a.rows;
  const DType d = static_cast<DType>(a.dtype);
  if ((d != DType::f16 && d != DType::bf16 && d != DType::f32) || r.row_len < 1 || r.row_len > kMaxWarpRow ||
      r.kept.rank > 1)
    return false;
  if (r.red.rank == 0) return true;
  return r.red.rank == 1 && r.red_in[0] == 1 && r.red_out[0] == 1 && (!a.weight || a.weight_strides[0] == 1) &&
         (!a.bias || a.bias_strides[0] == 1);
}

// The warp kernel's argument for rows that warp_rows_fit.
WarpRows warp_rows_of(const RowArgs& a) {
  const RowSpace& r = a.rows;
  WarpRows w;
  w.in = a.in;
  w.out = a.out;
  w.weight = a.weight;
  w.bias = a.bias;
  w.rows = r.rows;
  w.in_row = r.kept.rank == 1 ? r.kept_in[0] : 0;
  w.out_row = r.kept.rank == 1 ? r.kept_out[0] : 0;
  w.row_len = static_cast<int>(r.row_len);
  w.eps = static_cast<float>(a.eps);
  w.op = a.op;
  w.param_dtype = a.param_dtype;
  w.dtype = a.dtype;
  return w;
}

}  // namespace

cudaError_t launch_rows(const RowArgs& args, cudaStream_t stream) {
  if (args.rows.rows == 0) return cudaSuccess;
  RowArgs a = args;
  collapse(a.rows.kept, {a.rows.kept_in, a.rows.kept_out});
  collapse(a.rows.red, {a.rows.red_in, a.rows.red_out, a.weight_strides, a.bias_strides});
  if (warp_rows_fit(a)) {
    const WarpRows w = warp_rows_of(a);
    switch (static_cast<DType>(a.dtype)) {
      case DType::f16: launch_warp_rows<__half>(w, stream); break;
      case DType::bf16: launch_warp_rows<__nv_bfloat16>(w, stream); break;
      default: launch_warp_rows<float>(w, stream); break;
    }
    return cudaGetLastError();
  }
  const unsigned blocks = static_cast<unsigned>(a.rows.rows > (1 << 20) ? (1 << 20) : a.rows.rows);
  int threads = kThreads;
  while (threads > 32 && threads / 2 >= a.rows.row_len) threads /= 2;
  if (static_cast<DType>(a.dtype) == DType::f64)
    row_kernel<double><<<blocks, threads, 0, stream>>>(a);
  else
    row_kernel<float><<<blocks, threads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
