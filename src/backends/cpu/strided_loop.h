// Walks an N-d index space with several strided operands at once. Kernels use
// it for broadcasting and non-contiguous inputs: for_each_offset calls
// fn(offsets) with each operand's element offset, innermost axis fastest.
// Ranges [begin, end) of the flattened index let callers split work across
// threads; coalesce_axes shortens the walk first.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ir/tensor_type.h"

namespace kiln::cpu {

// Merges each axis into the one outside it where, in every stride array, the
// outer stride equals the inner stride times the inner size (a broadcast run
// included: 0 == 0 * n), and drops axes of size 1, which are never stepped
// along. Walking the merged space visits the same offsets in the same order.
template <size_t N>
void coalesce_axes(Dims& dims, const std::array<Dims*, N>& strides) {
  Dims merged;
  std::array<Dims, N> merged_strides;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    bool merge = !merged.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = merged_strides[k].back() == (*strides[k])[i] * dims[i];
    if (merge) {
      merged.back() *= dims[i];
      for (size_t k = 0; k < N; ++k) merged_strides[k].back() = (*strides[k])[i];
      continue;
    }
    merged.push_back(dims[i]);
    for (size_t k = 0; k < N; ++k) merged_strides[k].push_back((*strides[k])[i]);
  }
  dims = std::move(merged);
  for (size_t k = 0; k < N; ++k) *strides[k] = std::move(merged_strides[k]);
}

template <size_t N, typename Fn>
void for_each_offset(const Dims& dims, const std::array<const Dims*, N>& strides, int64_t begin, int64_t end,
                     Fn&& fn) {
  const size_t rank = dims.size();
  if (begin >= end) return;
  // Decompose `begin` into a multi-index.
  std::vector<int64_t> index(rank, 0);
  std::array<int64_t, N> offsets{};
  int64_t rest = begin;
  for (size_t d = rank; d-- > 0;) {
    index[d] = dims[d] ? rest % dims[d] : 0;
    rest = dims[d] ? rest / dims[d] : 0;
    for (size_t k = 0; k < N; ++k) offsets[k] += index[d] * (*strides[k])[d];
  }
  if (rank == 0) {
    fn(offsets);
    return;
  }
  const int64_t inner = dims[rank - 1];
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = (*strides[k])[rank - 1];
  int64_t i = begin;
  while (i < end) {
    // Run along the innermost axis.
    int64_t run = std::min(end - i, inner - index[rank - 1]);
    for (int64_t j = 0; j < run; ++j) {
      fn(offsets);
      for (size_t k = 0; k < N; ++k) offsets[k] += inner_stride[k];
    }
    i += run;
    index[rank - 1] += run;
    for (size_t k = 0; k < N; ++k) offsets[k] -= inner_stride[k] * index[rank - 1];
    // Carry into outer axes.
    size_t d = rank - 1;
    index[d] = 0;
    while (d > 0) {
      --d;
      ++index[d];
      for (size_t k = 0; k < N; ++k) offsets[k] += (*strides[k])[d];
      if (index[d] < dims[d]) break;
      for (size_t k = 0; k < N; ++k) offsets[k] -= (*strides[k])[d] * index[d];
      index[d] = 0;
    }
  }
}

}  // namespace kiln::cpu
