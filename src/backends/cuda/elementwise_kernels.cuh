// The elementwise kernel templates (elementwise_kernels.cu says what they
// compute) and the launch forms of one op. Their instantiations, one per op
// and compute type, are the heaviest code nvcc builds in kiln, so they are
// split over kElementwiseParts translation units (elementwise_part<K>.cu,
// each including elementwise_part.inc), compiled side by side; every part
// holds the ops whose index % kElementwiseParts is K. Include only from those
// files and elementwise_kernels.cu.
#pragma once

#include "backends/cuda/vector_io.cuh"

namespace kiln::cuda {

using LaunchFn = cudaError_t (*)(const ElementwiseArgs&, cudaStream_t);

// One op's launchers by compute type; null where the op has no such form.
struct Forms {
  LaunchFn f32, f64, i64;
};

namespace {

constexpr int kThreads = 256;

template <typename C>
KILN_D C load_operand(const ElementwiseArgs& a, int k, int64_t i) {
  int64_t off = operand_offset(i, a.space, a.in[k]);
  return a.as_bool ? load_bool<C>(a.in[k].data, a.in[k].dtype, off) : load_as<C>(a.in[k].data, a.in[k].dtype, off);
}

template <int Op, typename C>
KILN_D void compute_one(const ElementwiseArgs& a, int64_t i) {
  C x = load_operand<C>(a, 0, i);
  C y = a.arity > 1 ? load_operand<C>(a, 1, i) : C(0);
  C z = a.arity > 2 ? load_operand<C>(a, 2, i) : C(0);
  store_as<C>(a.out, a.out_dtype, i, apply_op<C>(Op, x, y, z));
}

template <int Op, typename C>
__global__ void __launch_bounds__(kThreads) elementwise_kernel(const __grid_constant__ ElementwiseArgs a) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < a.space.n; i += step)
    compute_one<Op, C>(a, i);
}

// ---- the packed kernel: f16/bf16 outputs, kVec elements per thread ----------

template <typename T>
inline constexpr int kVec = kPack<T>;  // 8: one 16-byte store

// x[j] = operand k at index i + j, for a group i..i+kVec-1 inside the space.
// When the group lies in one innermost row (a linear operand, or an
// innermost dim that kVec divides) the operand's offset is computed once and
// stepped; a step of 1 in the output's dtype at a 16-byte aligned address is
// one vector load. Any other operand is read element by element.
template <typename T>
KILN_D void load_group(const ElementwiseArgs& a, int k, int64_t i, bool one_row, float (&x)[kVec<T>]) {
  const Operand& o = a.in[k];
  if (!o.linear && !one_row) {
#pragma unroll
    for (int j = 0; j < kVec<T>; ++j) x[j] = load_operand<float>(a, k, i + j);
    return;
  }
  const int64_t base = o.linear ? i : offset_of(i, a.space, o.strides);
  const int64_t step = o.linear ? 1 : o.strides[a.space.rank - 1];
  if (step == 1 && o.dtype == a.out_dtype) {
    const T* p = static_cast<const T*>(o.data) + base;
    if (reinterpret_cast<uintptr_t>(p) % 16 == 0) {
      load_pack<T>(p, x);
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < kVec<T>; ++j) x[j] = load_as<float>(o.data, o.dtype, base + j * step);
}

template <int Op, typename T>
__global__ void __launch_bounds__(kThreads) elementwise_packed_kernel(const __grid_constant__ ElementwiseArgs a) {
  constexpr int V = kVec<T>;
  const int64_t n = a.space.n, groups = (n + V - 1) / V;
  const bool one_row = a.space.rank > 0 && a.space.dims[a.space.rank - 1] % V == 0;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups; g += step) {
    const int64_t i = g * V;
    if (i + V > n) {  // the last, partial group
      for (int64_t e = i; e < n; ++e) compute_one<Op, float>(a, e);
      continue;
    }
    float x[V], y[V] = {}, z[V] = {};
    load_group<T>(a, 0, i, one_row, x);
    if (a.arity > 1) load_group<T>(a, 1, i, one_row, y);
    if (a.arity > 2) load_group<T>(a, 2, i, one_row, z);
    float r[V];
#pragma unroll
    for (int j = 0; j < V; ++j) r[j] = apply_op<float>(Op, x[j], y[j], z[j]);
    store_pack<T>(static_cast<T*>(a.out) + i, r);
  }
}

unsigned blocks_for(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks > (1 << 20) ? (1 << 20) : blocks);
}

template <int Op, typename C>
cudaError_t launch_one(const ElementwiseArgs& a, cudaStream_t stream) {
  if (a.space.n == 0) return cudaSuccess;
  if constexpr (std::is_same_v<C, float>) {
    const DType out = static_cast<DType>(a.out_dtype);
    if (!a.as_bool && (out == DType::f16 || out == DType::bf16) && reinterpret_cast<uintptr_t>(a.out) % 16 == 0) {
      const unsigned blocks = blocks_for((a.space.n + kVec<__half> - 1) / kVec<__half>);
      if (out == DType::f16)
        elementwise_packed_kernel<Op, __half><<<blocks, kThreads, 0, stream>>>(a);
      else
        elementwise_packed_kernel<Op, __nv_bfloat16><<<blocks, kThreads, 0, stream>>>(a);
      return cudaGetLastError();
    }
  }
  elementwise_kernel<Op, C><<<blocks_for(a.space.n), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

template <int Op, bool FloatingOnly>
constexpr Forms forms() {
  return Forms{&launch_one<Op, float>, &launch_one<Op, double>, FloatingOnly ? nullptr : &launch_one<Op, int64_t>};
}

}  // namespace

inline constexpr int kElementwiseParts = 4;

// Indexed by op (elementwise.def order); an op of another part has no forms here.
extern const Forms* const kElementwisePart0;
extern const Forms* const kElementwisePart1;
extern const Forms* const kElementwisePart2;
extern const Forms* const kElementwisePart3;
extern const Forms kElementwiseCastForms;  // defined with part 0

}  // namespace kiln::cuda
