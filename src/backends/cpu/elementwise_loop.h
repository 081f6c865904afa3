// Helpers for chunked elementwise loops over strided operands of any dtype:
// load a run of the (broadcast) index space into a compute-type buffer, store
// a compute-type buffer into a contiguous output, and split large index
// ranges over the thread pool. Used by the elementwise and cast kernels and
// available to the fused-group kernel.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/dtype_dispatch.h"
#include "backends/cpu/strided_loop.h"
#include "ops/broadcast.h"
#include "runtime/tensor_view.h"
#include "support/thread_pool.h"

namespace kiln::cpu {

// float, double, Half, BFloat16: the storage types of the floating dtypes.
template <typename T>
inline constexpr bool is_float_storage =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Values per chunk: buffers of this many compute values live on the stack.
inline constexpr int64_t kElementwiseChunk = 1024;
// Below this many elements a kernel runs on the calling thread.
inline constexpr int64_t kParallelThreshold = 32768;

// Runs fn(begin, end) over [0, n): inline when n is small, else split over the pool.
template <typename Fn>
void parallel_range(ThreadPool& pool, int64_t n, Fn&& fn) {
  if (n <= kParallelThreshold) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  pool.parallel_for(n, kParallelThreshold / 2, fn);
}

// One operand as the loop reads it: its view, the output's index space as
// this operand walks it (dims and its strides over them, 0 on broadcast
// axes), and whether it can be read linearly. Adjacent axes that the operand
// steps through as one are merged (coalesce_axes), so a per-channel scale
// over a [C, K, 3, 3] weight is C runs of K*9 equal values instead of runs of
// three; the output's flat index is the same either way.
struct LoopOperand {
  const TensorView* view = nullptr;
  Dims dims;                // the output's dims, merged where this operand allows
  Dims strides;             // this operand's strides over `dims`
  bool linear = false;      // same dims as the output and contiguous
  bool as_bool = false;     // read as 0/1 (nonzero is true): logical ops
};

// `view` read over the output dims `out_dims` (which it broadcasts to).
inline LoopOperand loop_operand(const TensorView& view, const Dims& out_dims) {
  LoopOperand operand;
  TensorType t = view.type();
  operand.view = &view;
  operand.dims = out_dims;
  operand.strides = broadcast_strides(t, out_dims);
  operand.linear = t.dims == out_dims && t.is_contiguous();
  coalesce_axes<1>(operand.dims, {&operand.strides});
  return operand;
}

// Storage value -> compute value C (as 0/1 when as_bool).
template <typename C, typename S>
inline C load_value(S v, bool as_bool) {
  auto c = to_compute<S>(v);
  if (as_bool) return c != decltype(c)(0) ? C(1) : C(0);
  return static_cast<C>(c);
}

// Values [begin, begin + n) of the output index space of `operand`, in C.
// Returns a pointer into the operand's own data when no conversion is needed,
// else fills and returns `buf` (n <= kElementwiseChunk).
template <typename C>
const C* load_chunk(const LoopOperand& operand, int64_t begin, int64_t n, C* buf) {
  const TensorView& v = *operand.view;
  return dispatch_dtype(v.dtype, [&]<typename S>() -> const C* {
    const S* p = v.ptr<const S>();
    if (operand.linear) {
      if constexpr (std::is_same_v<S, C>) {
        if (!operand.as_bool) return p + begin;
      }
      for (int64_t i = 0; i < n; ++i) buf[i] = load_value<C, S>(p[begin + i], operand.as_bool);
      return buf;
    }
    int64_t j = 0;
    for_each_offset<1>(operand.dims, {&operand.strides}, begin, begin + n,
                       [&](const std::array<int64_t, 1>& o) { buf[j++] = load_value<C, S>(p[o[0]], operand.as_bool); });
    return buf;
  });
}

// Writes n compute values into the contiguous output at element `begin`.
template <typename C>
void store_chunk(const TensorView& out, int64_t begin, int64_t n, const C* buf) {
  dispatch_dtype(out.dtype, [&]<typename O>() {
    O* p = out.ptr<O>() + begin;
    if constexpr (std::is_same_v<O, C>) {
      if (p == buf) return;
    }
    for (int64_t i = 0; i < n; ++i) p[i] = from_compute<O, C>(buf[i]);
  });
}

}  // namespace kiln::cpu
