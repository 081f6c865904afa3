// The index spaces of the CUDA kernels (Note [CUDA index spaces] in launch.h):
// the struct, its construction and collapsing on the host, and the offsets
// of an index on host or device. Plain C++ without nvcc, so host tests check
// the offsets of collapsed spaces against naive indexing.
//
// Indices below 2^31 (IndexSpace::index32) are split into a multi-index in
// 32 bits with one FastDivider per dim; larger spaces use int64 division.
// Offsets always accumulate in int64, so strides of any size (views into
// large buffers, negative strides) stay exact on both paths.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "backends/cuda/fast_divider.h"

namespace kiln::cuda {

inline constexpr int kMaxRank = 8;

struct IndexSpace {
  int rank = 0;
  bool index32 = false;  // 0 < n < 2^31: div[] is set and indices split in 32 bits
  int64_t n = 0;         // product of dims
  int64_t dims[kMaxRank] = {};
  FastDivider div[kMaxRank];  // dims[d] as a divisor, when index32
};

// Sets `s` to the row-major space dims[0..rank), with n and the dividers.
inline void set_dims(IndexSpace& s, int rank, const int64_t* dims) {
  s.rank = rank;
  s.n = 1;
  for (int d = 0; d < rank; ++d) {
    s.dims[d] = dims[d];
    s.n *= dims[d];
  }
  s.index32 = s.n > 0 && s.n < (int64_t{1} << 31);
  for (int d = 0; d < rank; ++d) s.div[d] = s.index32 ? FastDivider(static_cast<uint32_t>(dims[d])) : FastDivider();
}

// Collapses `s` in place over stride arrays (element strides over its dims,
// rewritten too): dims of size 1 are dropped, and a dim merges into the one
// outside it when every array steps over the pair as over one dim (outer
// stride == inner stride * inner size). Every index keeps its offsets, so a
// kernel walks the collapsed space exactly as the original one.
inline void collapse(IndexSpace& s, std::initializer_list<int64_t*> strides) {
  if (s.n == 0) return;
  int64_t dims[kMaxRank];
  int r = 0;
  for (int d = 0; d < s.rank; ++d) {
    if (s.dims[d] == 1) continue;
    bool merge = r > 0;
    for (int64_t* st : strides) merge = merge && st[r - 1] == st[d] * s.dims[d];
    if (merge) {
      dims[r - 1] *= s.dims[d];
      for (int64_t* st : strides) st[r - 1] = st[d];
    } else {
      dims[r] = s.dims[d];
      for (int64_t* st : strides) st[r] = st[d];
      ++r;
    }
  }
  set_dims(s, r, dims);
}

// The offsets of row-major index i (0 <= i < s.n) under K stride arrays at
// once, from one split of i into a multi-index.
template <int K>
KILN_HD void offsets_of(int64_t i, const IndexSpace& s, const int64_t* const (&strides)[K], int64_t (&off)[K]) {
  for (int k = 0; k < K; ++k) off[k] = 0;
  if (s.rank == 0) return;
  int d = s.rank - 1;
  if (s.index32) {
    uint32_t j = static_cast<uint32_t>(i);
    for (; d > 0; --d) {
      const uint32_t q = s.div[d].div(j);
      const int64_t r = j - q * s.div[d].divisor;
      for (int k = 0; k < K; ++k) off[k] += r * strides[k][d];
      j = q;
    }
    i = j;  // the outermost index needs no division: i < n
  } else {
    for (; d > 0; --d) {
      const int64_t r = i % s.dims[d];
      for (int k = 0; k < K; ++k) off[k] += r * strides[k][d];
      i /= s.dims[d];
    }
  }
  for (int k = 0; k < K; ++k) off[k] += i * strides[k][0];
}

// The offset of row-major index i under one stride array.
KILN_HD int64_t offset_of(int64_t i, const IndexSpace& s, const int64_t* strides) {
  const int64_t* const st[1] = {strides};
  int64_t off[1];
  offsets_of<1>(i, s, st, off);
  return off[0];
}

}  // namespace kiln::cuda
