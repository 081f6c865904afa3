// CUDA kernel for cumsum: one thread per row, a sequential running sum in the
// CPU reference's compute type (float for f16/bf16/f32, double for f64, int64
// for integers and bool), rounded to the dtype at each store. The rows kiln
// sees (position ids, masks) are short, so a scan across threads would not pay.
#include "backends/cuda/device_math.cuh"

namespace kiln::cuda {

namespace {

constexpr int kThreads = 128;

template <typename C>
__global__ void __launch_bounds__(kThreads) cumsum_kernel(const __grid_constant__ CumsumArgs a) {
  const RowSpace& r = a.rows;
  for (int64_t row = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; row < r.rows;
       row += int64_t{blockDim.x} * gridDim.x) {
    const int64_t in_base = offset_of(row, r.kept, r.kept_in), out_base = offset_of(row, r.kept, r.kept_out);
    C sum = 0;
    for (int64_t k = 0; k < r.row_len; ++k) {
      sum += load_as<C>(a.in, a.dtype, in_base + offset_of(k, r.red, r.red_in));
      store_as<C>(a.out, a.dtype, out_base + offset_of(k, r.red, r.red_out), sum);
    }
  }
}

}  // namespace

cudaError_t launch_cumsum(const CumsumArgs& args, cudaStream_t stream) {
  if (args.rows.rows == 0 || args.rows.row_len == 0) return cudaSuccess;
  CumsumArgs a = args;
  collapse(a.rows.kept, {a.rows.kept_in, a.rows.kept_out});
  collapse(a.rows.red, {a.rows.red_in, a.rows.red_out});
  const int64_t want = (a.rows.rows + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(want > (1 << 20) ? (1 << 20) : want);
  switch (static_cast<DType>(a.dtype)) {
    case DType::f32:
    case DType::f16:
    case DType::bf16: cumsum_kernel<float><<<blocks, kThreads, 0, stream>>>(a); break;
    case DType::f64: cumsum_kernel<double><<<blocks, kThreads, 0, stream>>>(a); break;
    default: cumsum_kernel<int64_t><<<blocks, kThreads, 0, stream>>>(a); break;
  }
  return cudaGetLastError();
}

}  // namespace kiln::cuda
