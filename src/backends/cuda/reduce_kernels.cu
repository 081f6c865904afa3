// CUDA kernels for the axis reductions sum, mean, amax and amin: one block per
// output element, reading its row through strides (RowSpace in launch.h,
// collapsed first). Sums and means of floats accumulate in double like the
// CPU reference, integer sums in int64; amax/amin compare in the compute type
// and propagate NaN.
#include "backends/cuda/block_reduce.cuh"

namespace kiln::cuda {

namespace {

constexpr int kThreads = 256;

template <typename A, typename C>
__global__ void __launch_bounds__(kThreads) reduce_kernel(const __grid_constant__ ReduceArgs a) {
  __shared__ A shared[32];
  const RowSpace& r = a.rows;
  for (int64_t row = blockIdx.x; row < r.rows; row += gridDim.x) {
    const int64_t base = offset_of(row, r.kept, r.kept_in);
    A acc;
    if (a.op == ReduceOp::sum || a.op == ReduceOp::mean) {
      acc = 0;
      for (int64_t k = threadIdx.x; k < r.row_len; k += blockDim.x)
        acc += static_cast<A>(load_as<C>(a.in, a.in_dtype, base + offset_of(k, r.red, r.red_in)));
      acc = block_reduce(acc, SumOp{}, shared);
      if (a.op == ReduceOp::mean) acc = acc / static_cast<A>(r.row_len);
    } else {
      const bool is_max = a.op == ReduceOp::amax;
      acc = static_cast<A>(load_as<C>(a.in, a.in_dtype, base));  // rows are never empty (op table check)
      for (int64_t k = threadIdx.x; k < r.row_len; k += blockDim.x) {
        A v = static_cast<A>(load_as<C>(a.in, a.in_dtype, base + offset_of(k, r.red, r.red_in)));
        acc = is_max ? sm::k_maximum(acc, v) : sm::k_minimum(acc, v);
      }
      acc = is_max ? block_reduce(acc, MaxOp{}, shared) : block_reduce(acc, MinOp{}, shared);
    }
    if (threadIdx.x == 0) store_as<A>(a.out, a.out_dtype, row, acc);
  }
}

bool is_float(int d) {
  DType t = static_cast<DType>(d);
  return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f64;
}

}  // namespace

cudaError_t launch_reduce(const ReduceArgs& args, cudaStream_t stream) {
  if (args.rows.rows == 0) return cudaSuccess;
  ReduceArgs a = args;  // out[row] is contiguous: only the input's strides shape the spaces
  collapse(a.rows.kept, {a.rows.kept_in});
  collapse(a.rows.red, {a.rows.red_in});
  const unsigned blocks = static_cast<unsigned>(a.rows.rows > (1 << 20) ? (1 << 20) : a.rows.rows);
  int threads = kThreads;
  while (threads > 32 && threads / 2 >= a.rows.row_len) threads /= 2;
  const bool extreme = a.op == ReduceOp::amax || a.op == ReduceOp::amin;
  if (!is_float(a.in_dtype))
    reduce_kernel<int64_t, int64_t><<<blocks, threads, 0, stream>>>(a);
  else if (extreme && static_cast<DType>(a.in_dtype) != DType::f64)
    reduce_kernel<float, float><<<blocks, threads, 0, stream>>>(a);
  else
    reduce_kernel<double, double><<<blocks, threads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
