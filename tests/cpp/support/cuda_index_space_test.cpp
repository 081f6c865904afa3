// The CUDA kernels' index math on the host (backends/cuda/fast_divider.h and
// index_space.h compile as plain C++): the fast divider against the `/`
// operator, and collapsed index spaces against naive strided offsets.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "backends/cuda/index_space.h"

namespace kiln::cuda {
namespace {

constexpr uint32_t kMaxNumerator = (uint32_t{1} << 31) - 1;

void expect_divides(uint32_t d, uint32_t n) {
  const FastDivider f(d);
  ASSERT_EQ(f.div(n), n / d) << "n = " << n << ", d = " << d;
}

std::vector<uint32_t> test_divisors() {
  std::vector<uint32_t> ds = {1, 2, 3, 5, 6, 7, 12, 64, 197, 768, 1000, 3072, 50257, 65521, 1000003, 999999937, 1000000007,
                              2147483629u /* prime */, kMaxNumerator /* prime */, uint32_t{1} << 31 /* the largest */};
  for (int k = 1; k <= 30; ++k) {
    const uint32_t p = uint32_t{1} << k;
    ds.insert(ds.end(), {p - 1, p, p + 1});
  }
  std::mt19937 rng(5);
  for (int i = 0; i < 200; ++i) ds.push_back(std::uniform_int_distribution<uint32_t>(1, kMaxNumerator)(rng));
  for (int i = 0; i < 200; ++i) ds.push_back(std::uniform_int_distribution<uint32_t>(1, 5000)(rng));
  return ds;
}

TEST(CudaIndexMath, FastDividerMatchesDivision) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<uint32_t> any(0, kMaxNumerator);
  for (uint32_t d : test_divisors()) {
    for (uint32_t n : {0u, 1u, 2u, d - 1, d, kMaxNumerator, kMaxNumerator - 1, kMaxNumerator - d + 1, uint32_t{1} << 30})
      if (n <= kMaxNumerator) expect_divides(d, n);
    // Around multiples of d, where a rounding error would show first.
    for (uint64_t q : {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{kMaxNumerator} / d, uint64_t{kMaxNumerator} / d / 2})
      for (int64_t delta = -2; delta <= 2; ++delta) {
        const int64_t n = static_cast<int64_t>(q * d) + delta;
        if (n >= 0 && n <= kMaxNumerator) expect_divides(d, static_cast<uint32_t>(n));
      }
    for (int i = 0; i < 2000; ++i) expect_divides(d, any(rng));
  }
}

TEST(CudaIndexMath, FastDividerSmallDivisorsExhaustively) {
  for (uint32_t d = 1; d <= 300; ++d) {
    const FastDivider f(d);
    for (uint32_t n = 0; n < 70000; ++n) ASSERT_EQ(f.div(n), n / d) << "n = " << n << ", d = " << d;
  }
}

using Strides = std::vector<int64_t>;

// The offset of row-major index i over dims under strides, the slow way.
int64_t naive_offset(int64_t i, const std::vector<int64_t>& dims, const Strides& strides) {
  int64_t off = 0;
  for (size_t d = dims.size(); d-- > 0;) {
    off += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return off;
}

struct Collapsed {
  IndexSpace space;
  std::vector<Strides> strides;  // kMaxRank entries each, as the kernels hold them
};

Collapsed collapse_over(const std::vector<int64_t>& dims, std::vector<Strides> strides) {
  Collapsed c;
  set_dims(c.space, static_cast<int>(dims.size()), dims.data());
  for (Strides& s : strides) s.resize(kMaxRank, 0);
  c.strides = strides;
  if (strides.size() == 1) collapse(c.space, {c.strides[0].data()});
  if (strides.size() == 2) collapse(c.space, {c.strides[0].data(), c.strides[1].data()});
  if (strides.size() == 3) collapse(c.space, {c.strides[0].data(), c.strides[1].data(), c.strides[2].data()});
  return c;
}

// Every index of the collapsed space (32-bit path, then the int64 path) has
// the offsets the original dims and strides give.
void expect_same_offsets(const std::vector<int64_t>& dims, const std::vector<Strides>& strides, const Collapsed& c) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  ASSERT_EQ(c.space.n, n);
  IndexSpace wide = c.space;
  wide.index32 = false;
  for (int64_t i = 0; i < n; ++i)
    for (size_t k = 0; k < strides.size(); ++k) {
      const int64_t want = naive_offset(i, dims, strides[k]);
      ASSERT_EQ(offset_of(i, c.space, c.strides[k].data()), want) << "index " << i << ", array " << k;
      ASSERT_EQ(offset_of(i, wide, c.strides[k].data()), want) << "index " << i << ", array " << k << " (int64)";
    }
  if (n > 0) {
    const int64_t* const three[3] = {c.strides[0].data(), c.strides[strides.size() > 1 ? 1 : 0].data(),
                                     c.strides.back().data()};
    int64_t off[3];
    offsets_of<3>(n - 1, c.space, three, off);
    EXPECT_EQ(off[0], naive_offset(n - 1, dims, strides[0]));
    EXPECT_EQ(off[2], naive_offset(n - 1, dims, strides.back()));
  }
}

std::vector<int64_t> collapsed_dims(const Collapsed& c) { return {c.space.dims, c.space.dims + c.space.rank}; }

TEST(CudaIndexMath, ContiguousCollapsesToOneDim) {
  const std::vector<int64_t> dims = {2, 3, 4, 5};
  const std::vector<Strides> strides = {{60, 20, 5, 1}, {60, 20, 5, 1}};
  Collapsed c = collapse_over(dims, strides);
  EXPECT_EQ(collapsed_dims(c), (std::vector<int64_t>{120}));
  EXPECT_EQ(c.strides[0][0], 1);
  EXPECT_TRUE(c.space.index32);
  expect_same_offsets(dims, strides, c);
}

TEST(CudaIndexMath, PermutedHeadsKeepTheirDims) {
  // [B, S, H, D] read as [B, H, S, D] into a contiguous output.
  const std::vector<int64_t> dims = {2, 12, 19, 8};
  const std::vector<Strides> strides = {{19 * 12 * 8, 8, 12 * 8, 1}, {12 * 19 * 8, 19 * 8, 8, 1}};
  Collapsed c = collapse_over(dims, strides);
  EXPECT_EQ(collapsed_dims(c), dims);
  expect_same_offsets(dims, strides, c);
  // With one head the permutation moves nothing: everything merges.
  const std::vector<int64_t> one_head = {2, 1, 19, 8};
  const std::vector<Strides> one_head_strides = {{19 * 8, 8, 8, 1}, {19 * 8, 19 * 8, 8, 1}};
  Collapsed c1 = collapse_over(one_head, one_head_strides);
  EXPECT_EQ(collapsed_dims(c1), (std::vector<int64_t>{2 * 19 * 8}));
  expect_same_offsets(one_head, one_head_strides, c1);
}

TEST(CudaIndexMath, BroadcastDimsMergeWithEachOther) {
  // out [3, 4, 5] = a [3, 4, 5] + bias [5]: the two outer dims merge.
  const std::vector<int64_t> dims = {3, 4, 5};
  const std::vector<Strides> strides = {{20, 5, 1}, {20, 5, 1}, {0, 0, 1}};
  Collapsed c = collapse_over(dims, strides);
  EXPECT_EQ(collapsed_dims(c), (std::vector<int64_t>{12, 5}));
  expect_same_offsets(dims, strides, c);
  // A [3, 1, 5] operand broadcast over axis 1 blocks that merge.
  const std::vector<Strides> mid = {{20, 5, 1}, {5, 0, 1}};
  Collapsed c2 = collapse_over(dims, mid);
  EXPECT_EQ(collapsed_dims(c2), dims);
  expect_same_offsets(dims, mid, c2);
}

TEST(CudaIndexMath, PaddedAndSizeOneDims) {
  const std::vector<int64_t> dims = {3, 1, 4, 1, 5};
  const std::vector<Strides> padded = {{2, 99, 8, 7, 40}};  // axis 0 fastest, padded
  Collapsed c = collapse_over(dims, padded);
  EXPECT_EQ(collapsed_dims(c), (std::vector<int64_t>{3, 4, 5}));
  expect_same_offsets(dims, padded, c);
  // Rows padded to 6 elements: the row dim cannot merge.
  const std::vector<int64_t> rows = {4, 5};
  const std::vector<Strides> row_strides = {{6, 1}, {5, 1}};
  Collapsed c2 = collapse_over(rows, row_strides);
  EXPECT_EQ(collapsed_dims(c2), rows);
  expect_same_offsets(rows, row_strides, c2);
}

TEST(CudaIndexMath, DegenerateSpaces) {
  Collapsed ones = collapse_over({1, 1, 1}, {{5, 3, 1}});
  EXPECT_EQ(ones.space.rank, 0);
  EXPECT_EQ(ones.space.n, 1);
  EXPECT_EQ(offset_of(0, ones.space, ones.strides[0].data()), 0);
  Collapsed scalar = collapse_over({}, {{}});
  EXPECT_EQ(scalar.space.n, 1);
  EXPECT_EQ(offset_of(0, scalar.space, scalar.strides[0].data()), 0);
  Collapsed empty = collapse_over({3, 0, 4}, {{0, 4, 1}});
  EXPECT_EQ(empty.space.n, 0);
  EXPECT_FALSE(empty.space.index32);
}

TEST(CudaIndexMath, LargeAndNegativeStridesStayExact) {
  // A small space whose offsets pass 2^32: a view into a huge buffer.
  const std::vector<int64_t> dims = {3, 4, 7};
  const std::vector<Strides> strides = {{int64_t{1} << 33, int64_t{3} << 30, 1}, {-28, -7, -1}};
  Collapsed c = collapse_over(dims, strides);
  EXPECT_TRUE(c.space.index32);
  expect_same_offsets(dims, strides, c);
}

TEST(CudaIndexMath, SpacesOf2To31ElementsUseInt64Indices) {
  const std::vector<int64_t> dims = {3, int64_t{1} << 29, 3};
  Collapsed c = collapse_over(dims, {{1, 3, int64_t{3} << 29}});
  EXPECT_FALSE(c.space.index32);
  EXPECT_EQ(c.space.n, int64_t{9} << 29);
  for (int64_t i : {int64_t{0}, int64_t{1} << 31, (int64_t{9} << 29) - 1, int64_t{4000000007}})
    EXPECT_EQ(offset_of(i, c.space, c.strides[0].data()), naive_offset(i, dims, {1, 3, int64_t{3} << 29}));
  // Just below 2^31 elements the 32-bit path is taken, and its last index is exact.
  const std::vector<int64_t> below = {(int64_t{1} << 31) - 1};
  Collapsed b = collapse_over(below, {{1}});
  EXPECT_TRUE(b.space.index32);
  EXPECT_EQ(offset_of(below[0] - 1, b.space, b.strides[0].data()), below[0] - 1);
  const std::vector<int64_t> square = {46340, 46340};  // 2147395600 elements, transposed
  Collapsed s = collapse_over(square, {{1, 46340}});
  EXPECT_TRUE(s.space.index32);
  for (int64_t i : {int64_t{0}, int64_t{46339}, int64_t{46340}, int64_t{2147395599}, int64_t{1234567891}})
    EXPECT_EQ(offset_of(i, s.space, s.strides[0].data()), naive_offset(i, square, {1, 46340}));
}

}  // namespace
}  // namespace kiln::cuda
