// Index helpers for reductions: splits an input layout into kept axes (one per
// output element, row-major) and reduced axes, collapses reduced axes that are
// linear in memory, and visits the reduced elements of one output in row-major
// order (so the visit counter is torch's flattened index over those axes).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/tensor_type.h"

namespace kiln::cpu {

struct ReduceLayout {
  Dims kept_dims, kept_strides;  // output elements, row-major
  Dims red_dims, red_strides;    // reduced axes, collapsed where linear
  int64_t red_count = 1;         // elements reduced into each output
};

// `axes` sorted and normalized; strides in elements.
inline ReduceLayout make_reduce_layout(const Dims& dims, const Dims& strides, const std::vector<int64_t>& axes) {
  ReduceLayout l;
  size_t next = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (next < axes.size() && axes[next] == static_cast<int64_t>(i)) {
      ++next;
      l.red_count *= dims[i];
      if (dims[i] == 1) continue;
      if (!l.red_dims.empty() && l.red_strides.back() == strides[i] * dims[i]) {
        l.red_dims.back() *= dims[i];
        l.red_strides.back() = strides[i];
      } else {
        l.red_dims.push_back(dims[i]);
        l.red_strides.push_back(strides[i]);
      }
    } else {
      l.kept_dims.push_back(dims[i]);
      l.kept_strides.push_back(strides[i]);
    }
  }
  return l;
}

// Calls fn(offset) for each reduced element of the output at `base`, in
// row-major order. `index` is scratch (reused across calls to avoid allocation).
template <typename Fn>
inline void visit_reduced(const ReduceLayout& l, int64_t base, std::vector<int64_t>& index, Fn&& fn) {
  const size_t rank = l.red_dims.size();
  if (l.red_count == 0) return;
  if (rank == 0) {
    fn(base);
    return;
  }
  const int64_t inner = l.red_dims[rank - 1], step = l.red_strides[rank - 1];
  if (rank == 1) {
    for (int64_t j = 0; j < inner; ++j) fn(base + j * step);
    return;
  }
  index.assign(rank - 1, 0);
  int64_t offset = base;
  for (;;) {
    for (int64_t j = 0; j < inner; ++j) fn(offset + j * step);
    size_t d = rank - 1;
    while (d > 0) {
      --d;
      offset += l.red_strides[d];
      if (++index[d] < l.red_dims[d]) break;
      offset -= l.red_strides[d] * index[d];
      index[d] = 0;
      if (d == 0) return;
    }
  }
}

}  // namespace kiln::cpu
