// CUDA kernels that move data without arithmetic: strided copy (contiguous,
// concat, constant_pad's interior, output copies), fill (full, pad borders),
// arange, and the indexed copy behind gather, index_select and embedding.
// Elements move as 1, 2, 4 or 8 byte words, whatever their dtype; a copy
// whose innermost dim is contiguous on both sides moves up to 16 byte words
// (widened()). Index spaces are collapsed first (index_space.h).
#include <cstdint>

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
  const int member = static_cast<int>(blockIdx.y);  // 0 unless launch_copy_group moves several copies
  const W* src = static_cast<const W*>(member == 0 ? a.src : a.more_src[member - 1]);
  W* dst = static_cast<W*>(member == 0 ? a.dst : a.more_dst[member - 1]);
  const int64_t* const strides[2] = {a.src_strides, a.dst_strides};
  KILN_GRID_LOOP(i, a.space.n) {
    int64_t off[2];
    offsets_of<2>(i, a.space, strides, off);
    dst[off[1]] = src[off[0]];
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
  const int64_t* const strides[3] = {a.src_strides, a.idx_strides, a.dst_strides};
  KILN_GRID_LOOP(i, a.space.n) {
    int64_t off[3];
    offsets_of<3>(i, a.space, strides, off);
    int64_t idx = load_as<int64_t>(a.index, a.index_dtype, off[1]);
    if (idx < 0) idx += a.axis_size;
    W v{};
    if (idx >= 0 && idx < a.axis_size) v = src[off[0] + idx * a.axis_stride];
    dst[off[2]] = v;
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
  static void launch(const CopyArgs& a, unsigned b, cudaStream_t s) {
    copy_kernel<W><<<dim3(b, static_cast<unsigned>(a.members)), kThreads, 0, s>>>(a);
  }
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

// The same copy over words of f elements: when the innermost dim is
// contiguous on both sides, f divides its size and every other stride, and
// both pointers are aligned to the wider word, the innermost size and the
// other strides are divided by f. The largest f up to 16 bytes is taken.
CopyArgs widened(CopyArgs a) {
  const int last = a.space.rank - 1;
  if (last < 0 || a.src_strides[last] != 1 || a.dst_strides[last] != 1) return a;
  auto fits = [&](int f) {
    const uintptr_t bytes = static_cast<uintptr_t>(a.elem_size) * f;
    if (a.space.dims[last] % f != 0 || reinterpret_cast<uintptr_t>(a.src) % bytes != 0 ||
        reinterpret_cast<uintptr_t>(a.dst) % bytes != 0)
      return false;
    for (int d = 0; d < last; ++d)
      if (a.src_strides[d] % f != 0 || a.dst_strides[d] % f != 0) return false;
    return true;
  };
  int f = 16 / a.elem_size;
  while (f > 1 && !fits(f)) f /= 2;
  if (f == 1) return a;
  a.space.dims[last] /= f;
  for (int d = 0; d < last; ++d) {
    a.src_strides[d] /= f;
    a.dst_strides[d] /= f;
  }
  a.elem_size *= f;
  set_dims(a.space, a.space.rank, a.space.dims);
  return a;
}

}  // namespace

namespace {

CopyArgs prepared(const CopyArgs& args) {
  CopyArgs a = args;
  collapse(a.space, {a.src_strides, a.dst_strides});
  return widened(a);
}

cudaError_t launch_prepared(const CopyArgs& a, cudaStream_t s) {
  if (a.elem_size != 16) return by_width<CopyK>(a.elem_size, a.space.n, a, s);
  CopyK<uint4>::launch(a, blocks_for(a.space.n), s);
  return cudaGetLastError();
}

// Same collapsed space, word size and strides: one kernel walks both the same way.
bool same_walk(const CopyArgs& a, const CopyArgs& b) {
  if (a.elem_size != b.elem_size || a.space.rank != b.space.rank || a.space.n != b.space.n) return false;
  for (int d = 0; d < a.space.rank; ++d)
    if (a.space.dims[d] != b.space.dims[d] || a.src_strides[d] != b.src_strides[d] ||
        a.dst_strides[d] != b.dst_strides[d])
      return false;
  return true;
}

}  // namespace

cudaError_t launch_copy(const CopyArgs& args, cudaStream_t s) {
  if (args.space.n == 0) return cudaSuccess;
  CopyArgs a = prepared(args);
  a.members = 1;
  return launch_prepared(a, s);
}

cudaError_t launch_copy_group(const CopyArgs* copies, int n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  CopyArgs group = prepared(copies[0]);
  group.members = 1;
  bool one_launch = n <= kMaxCopyGroup && group.space.n > 0;
  for (int k = 1; k < n && one_launch; ++k) {
    const CopyArgs member = prepared(copies[k]);
    one_launch = same_walk(group, member);
    group.more_src[k - 1] = member.src;
    group.more_dst[k - 1] = member.dst;
  }
  if (!one_launch) {
    for (int k = 0; k < n; ++k)
      if (cudaError_t e = launch_copy(copies[k], s); e != cudaSuccess) return e;
    return cudaSuccess;
  }
  group.members = n;
  return launch_prepared(group, s);
}

cudaError_t launch_fill(const FillArgs& args, cudaStream_t s) {
  FillArgs a = args;
  collapse(a.space, {a.dst_strides});
  return by_width<FillK>(a.elem_size, a.space.n, a, s);
}

cudaError_t launch_indexed_copy(const IndexedCopyArgs& args, cudaStream_t s) {
  IndexedCopyArgs a = args;
  collapse(a.space, {a.src_strides, a.idx_strides, a.dst_strides});
  return by_width<IndexedK>(a.elem_size, a.space.n, a, s);
}

cudaError_t launch_arange(const ArangeArgs& a, cudaStream_t s) {
  if (a.n == 0) return cudaSuccess;
  arange_kernel<<<blocks_for(a.n), kThreads, 0, s>>>(a);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
