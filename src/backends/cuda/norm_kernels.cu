// CUDA kernels for the row-wise normalizations: softmax and log_softmax over
// one axis, layer_norm over the trailing axes. One block per row; the row is
// read through its strides (RowSpace in launch.h) and computed in float
// (double for f64), with the row maximum subtracted before exponentiating and
// the variance in two passes, like the CPU reference.
#include "backends/cuda/block_reduce.cuh"

namespace kiln::cuda {

namespace {

constexpr int kThreads = 256;

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

}  // namespace

cudaError_t launch_rows(const RowArgs& a, cudaStream_t stream) {
  if (a.rows.rows == 0) return cudaSuccess;
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
