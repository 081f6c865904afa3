// CUDA kernels that move data without arithmetic: strided copy (contiguous,
// concat, constant_pad's interior, output copies), fill (full, pad borders),
// arange, and the indexed copy behind gather, index_select and embedding.
// Elements move as 1, 2, 4 or 8 byte words, whatever their dtype.
#include "backends/cuda/device_math.cuh"

namespace kiln::cuda {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b > (1 << 20) ? (1 << 20) : b);
}

#define KILN_GRID_LOOP(i, n)                                                    \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; \
       i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <typename W>
__global__ void copy_kernel(const __grid_constant__ CopyArgs a) {
  const W* src = static_cast<const W*>(a.src);
  W* dst = static_cast<W*>(a.dst);
  KILN_GRID_LOOP(i, a.space.n) {
    dst[offset_of(i, a.space, a.dst_strides)] = src[offset_of(i, a.space, a.src_strides)];
  }
}

template <typename W>
__global__ void fill_kernel(const __grid_constant__ FillArgs a) {
  W v;
  memcpy(&v, &a.value, sizeof(W));
  W* dst = static_cast<W*>(a.dst);
  KILN_GRID_LOOP(i, a.space.n) { dst[offset_of(i, a.space, a.dst_strides)] = v; }
}

// Like the CPU arange: computed in double; integers saturate, NaN gives 0.
__global__ void arange_kernel(const __grid_constant__ ArangeArgs a) {
  KILN_GRID_LOOP(i, a.n) {
    double v = a.start + static_cast<double>(i) * a.step;
    DType d = static_cast<DType>(a.dtype);
    if (d != DType::f32 && d != DType::f16 && d != DType::bf16 && d != DType::f64 && d != DType::boolean) {
      int64_t q = v != v ? 0 : v >= 9.2233720368547758e18 ? INT64_MAX : v <= -9.2233720368547758e18 ? INT64_MIN : static_cast<int64_t>(v);
      store_as<int64_t>(a.dst, a.dtype, i * a.stride, q);
    } else {
      store_as<double>(a.dst, a.dtype, i * a.stride, v);
    }
  }
}

template <typename W>
__global__ void indexed_copy_kernel(const __grid_constant__ IndexedCopyArgs a) {
  const W* src = static_cast<const W*>(a.src);
  W* dst = static_cast<W*>(a.dst);
  KILN_GRID_LOOP(i, a.space.n) {
    int64_t idx = load_as<int64_t>(a.index, a.index_dtype, offset_of(i, a.space, a.idx_strides));
    if (idx < 0) idx += a.axis_size;
    W v{};
    if (idx >= 0 && idx < a.axis_size) v = src[offset_of(i, a.space, a.src_strides) + idx * a.axis_stride];
    dst[offset_of(i, a.space, a.dst_strides)] = v;
  }
}

template <template <typename> class K, typename Args>
cudaError_t by_width(int elem_size, int64_t n, const Args& a, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  switch (elem_size) {
    case 1: K<uint8_t>::launch(a, blocks_for(n), s); break;
    case 2: K<uint16_t>::launch(a, blocks_for(n), s); break;
    case 4: K<uint32_t>::launch(a, blocks_for(n), s); break;
    case 8: K<uint64_t>::launch(a, blocks_for(n), s); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename W>
struct CopyK {
  static void launch(const CopyArgs& a, unsigned b, cudaStream_t s) { copy_kernel<W><<<b, kThreads, 0, s>>>(a); }
};
template <typename W>
struct FillK {
  static void launch(const FillArgs& a, unsigned b, cudaStream_t s) { fill_kernel<W><<<b, kThreads, 0, s>>>(a); }
};
template <typename W>
struct IndexedK {
  static void launch(const IndexedCopyArgs& a, unsigned b, cudaStream_t s) {
    indexed_copy_kernel<W><<<b, kThreads, 0, s>>>(a);
  }
};

}  // namespace

cudaError_t launch_copy(const CopyArgs& a, cudaStream_t s) { return by_width<CopyK>(a.elem_size, a.space.n, a, s); }
cudaError_t launch_fill(const FillArgs& a, cudaStream_t s) { return by_width<FillK>(a.elem_size, a.space.n, a, s); }
cudaError_t launch_indexed_copy(const IndexedCopyArgs& a, cudaStream_t s) {
  return by_width<IndexedK>(a.elem_size, a.space.n, a, s);
}

cudaError_t launch_arange(const ArangeArgs& a, cudaStream_t s) {
  if (a.n == 0) return cudaSuccess;
  arange_kernel<<<blocks_for(a.n), kThreads, 0, s>>>(a);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
