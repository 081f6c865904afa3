// strided_copy and copy_range against naive indexing: a permute that keeps
// the last axis (rows copied whole) split over the pool at chunk bounds that
// fall inside rows, arbitrary sub-ranges, and a transposing copy.
#include "backends/cpu/data_copy.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

namespace kiln::cpu::internal {
namespace {

// dst[i, j, k, l] = src[i, k, j, l] for src of dims [a, c, b, d] (dims of dst: [a, b, c, d]).
std::vector<float> naive_swap_middle(const std::vector<float>& src, const Dims& dims) {
  const int64_t a = dims[0], b = dims[1], c = dims[2], d = dims[3];
  std::vector<float> out(src.size());
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < c; ++k)
        for (int64_t l = 0; l < d; ++l) out[((i * b + j) * c + k) * d + l] = src[((i * c + k) * b + j) * d + l];
  return out;
}

TEST(DataCopy, RowsContiguousInBothCopyWholeAndSplitAnywhere) {
  const Dims dims = {3, 40, 7, 100};  // 84000 elements: chunks of kCopyGrain end inside rows of 100
  std::vector<float> src(84000);
  std::iota(src.begin(), src.end(), 0.0f);
  const Dims src_strides = {7 * 40 * 100, 100, 40 * 100, 1}, dst_strides = {40 * 7 * 100, 7 * 100, 100, 1};
  const std::vector<float> want = naive_swap_middle(src, dims);
  std::vector<float> got(src.size(), -1.0f);
  strided_copy(ThreadPool::global(), dims, src.data(), src_strides, got.data(), dst_strides, sizeof(float));
  EXPECT_EQ(got, want);
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    int64_t begin = std::uniform_int_distribution<int64_t>(0, 83999)(rng);
    int64_t end = std::uniform_int_distribution<int64_t>(begin, 84000)(rng);
    std::vector<float> part(src.size(), -1.0f);
    copy_range(dims, src.data(), src_strides, part.data(), dst_strides, sizeof(float), begin, end);
    for (int64_t i = 0; i < 84000; ++i)
      ASSERT_EQ(part[static_cast<size_t>(i)], i >= begin && i < end ? want[static_cast<size_t>(i)] : -1.0f)
          << "range [" << begin << ", " << end << "), element " << i;
  }
}

TEST(DataCopy, TransposeCopiesElementByElement) {
  const Dims dims = {33, 17};
  std::vector<double> src(33 * 17), got(33 * 17);
  std::iota(src.begin(), src.end(), 0.0);
  strided_copy(ThreadPool::global(), dims, src.data(), Dims{1, 33}, got.data(), Dims{17, 1}, sizeof(double));
  for (int64_t i = 0; i < 33; ++i)
    for (int64_t j = 0; j < 17; ++j) EXPECT_EQ(got[static_cast<size_t>(i * 17 + j)], src[static_cast<size_t>(j * 33 + i)]);
}

}  // namespace
}  // namespace kiln::cpu::internal
