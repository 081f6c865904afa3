// The boundary between the CUDA backend's host code (.cpp, compiled by the
// C++ compiler, which sees kiln's graphs) and its device code (.cu, compiled
// by nvcc, which sees only these plain structs). Each kernel family takes one
// argument struct by value and a stream, and returns the launch's error; the
// lowering files fill the structs from a node's types once and set the data
// pointers per call. Dtypes travel as kiln::DType values (ir/dtype.h).
//
// Note [CUDA index spaces]
// Every kernel walks a row-major index space of at most kMaxRank dims (the
// output's, for elementwise work); operands give their strides (elements)
// over that space, zero along broadcast dims, so any view or broadcast is read
// in place without a copy. Callers describe the space as the tensors have it;
// each launch_* function first collapses it over all of its stride arrays
// (index_space.h), so a contiguous 4-D add runs as a 1-D one and a permuted
// copy keeps only the dims the permutation really separates.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/index_space.h"

namespace kiln::cuda {

// A strided read over an index space.
struct Operand {
  const void* data = nullptr;
  int dtype = 0;
  bool linear = false;  // offset == index; set by launch_elementwise after collapsing
  int64_t strides[kMaxRank] = {};
};

// The compute type of an elementwise expression (Note [Elementwise]).
enum class Compute : int { f32, f64, i64 };

// ---- elementwise and cast (elementwise_kernels.cu) ----------------------------

inline constexpr int kCastOp = -1;  // the identity expression: a dtype conversion

struct ElementwiseArgs {
  IndexSpace space;
  int arity = 1;
  bool as_bool = false;  // logical ops: operands read as x != 0
  Operand in[3];
  void* out = nullptr;  // contiguous over space
  int out_dtype = 0;
};

// Index of `name` in elementwise.def's order, or -1.
int elementwise_op_index(const char* name);
// Whether op (an index, or kCastOp) has a form in compute type c.
bool elementwise_has_form(int op, Compute c);
cudaError_t launch_elementwise(int op, Compute c, const ElementwiseArgs& args, cudaStream_t stream);

// ---- data movement (data_kernels.cu) -------------------------------------------

// dst[i] = src[i] over space, both strided; elements moved as bytes.
inline constexpr int kMaxCopyGroup = 4;
struct CopyArgs {
  IndexSpace space;
  int elem_size = 4;  // 1, 2, 4 or 8
  const void* src = nullptr;
  int64_t src_strides[kMaxRank] = {};
  void* dst = nullptr;
  int64_t dst_strides[kMaxRank] = {};
  // More copies of the same space and strides at other addresses, one per blockIdx.y (launch_copy_group).
  int members = 1;
  const void* more_src[kMaxCopyGroup - 1] = {};
  void* more_dst[kMaxCopyGroup - 1] = {};
};
cudaError_t launch_copy(const CopyArgs& args, cudaStream_t stream);
// The `n` copies (at most kMaxCopyGroup) in one launch when they share their space and strides (after
// collapsing and widening), else one launch each.
cudaError_t launch_copy_group(const CopyArgs* copies, int n, cudaStream_t stream);

struct FillArgs {
  IndexSpace space;
  int elem_size = 4;
  uint64_t value = 0;  // the element's bytes
  void* dst = nullptr;
  int64_t dst_strides[kMaxRank] = {};
};
cudaError_t launch_fill(const FillArgs& args, cudaStream_t stream);

// dst[i * stride] = start + i * step, computed in double, for i < n.
struct ArangeArgs {
  int64_t n = 0, stride = 1;
  double start = 0, step = 1;
  void* dst = nullptr;
  int dtype = 0;
};
cudaError_t launch_arange(const ArangeArgs& args, cudaStream_t stream);

// dst[p] = src[src_off(p) + index[idx_off(p)] * axis_stride] over space, the
// CPU backend's indexed copy (gather, index_select, embedding). An index out
// of [-axis_size, axis_size) writes zeros (a device cannot throw; the CPU
// backend reports it).
struct IndexedCopyArgs {
  IndexSpace space;
  int elem_size = 4;
  const void* src = nullptr;
  int64_t src_strides[kMaxRank] = {};
  const void* index = nullptr;
  int index_dtype = 0;
  int64_t idx_strides[kMaxRank] = {};
  int64_t axis_stride = 0, axis_size = 0;
  void* dst = nullptr;
  int64_t dst_strides[kMaxRank] = {};
};
cudaError_t launch_indexed_copy(const IndexedCopyArgs& args, cudaStream_t stream);

// ---- row-wise ops and reductions (norm_kernels.cu, reduce_kernels.cu) -------------

// Rows of an op over some axes: row r's element k sits at
// offset(r over kept dims) + offset(k over reduced dims), in each tensor.
struct RowSpace {
  int64_t rows = 0, row_len = 0;
  IndexSpace kept, red;
  int64_t kept_in[kMaxRank] = {}, red_in[kMaxRank] = {};    // input strides
  int64_t kept_out[kMaxRank] = {}, red_out[kMaxRank] = {};  // output strides
};

enum class RowOp : int { softmax, log_softmax, layer_norm };

struct RowArgs {
  RowSpace rows;
  RowOp op = RowOp::softmax;
  int dtype = 0;  // input and output
  const void* in = nullptr;
  void* out = nullptr;
  // layer_norm: optional weight and bias over the reduced dims (their strides there)
  const void* weight = nullptr;
  const void* bias = nullptr;
  int param_dtype = 0;
  int64_t weight_strides[kMaxRank] = {}, bias_strides[kMaxRank] = {};
  double eps = 1e-5;
};
cudaError_t launch_rows(const RowArgs& args, cudaStream_t stream);

enum class ReduceOp : int { sum, mean, amax, amin };

// out[r] (contiguous) = reduce over row r of `in`.
struct ReduceArgs {
  RowSpace rows;
  ReduceOp op = ReduceOp::sum;
  int in_dtype = 0, out_dtype = 0;
  const void* in = nullptr;
  void* out = nullptr;
};
cudaError_t launch_reduce(const ReduceArgs& args, cudaStream_t stream);

// ---- running sums (cumsum_kernels.cu) ------------------------------------------------

// out (strided) = running sums of `in` (strided, same dtype) along the rows of
// `rows`, whose reduced dims are the one summed axis.
struct CumsumArgs {
  RowSpace rows;
  int dtype = 0;  // input and output
  const void* in = nullptr;
  void* out = nullptr;
};
cudaError_t launch_cumsum(const CumsumArgs& args, cudaStream_t stream);

}  // namespace kiln::cuda
