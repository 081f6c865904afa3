// for_each_offset visits every element once with the right offsets, for
// broadcast and transposed operands and for split ranges; coalesce_axes
// merges the axes an operand steps through as one without changing them.
#include "backends/cpu/strided_loop.h"

#include <gtest/gtest.h>

namespace kiln::cpu {
namespace {

TEST(StridedLoop, MatchesNaiveIndexingOnSplitRanges) {
  Dims dims = {3, 4, 5};
  Dims a = {20, 5, 1};  // contiguous
  Dims b = {1, 0, 3};   // broadcast over axis 1, odd strides
  for (int64_t split : {1, 7, 13, 60}) {
    std::vector<std::pair<int64_t, int64_t>> seen;
    for (int64_t begin = 0; begin < 60; begin += split)
      for_each_offset<2>(dims, {&a, &b}, begin, std::min<int64_t>(60, begin + split),
                         [&](const std::array<int64_t, 2>& o) { seen.push_back({o[0], o[1]}); });
    ASSERT_EQ(seen.size(), 60u);
    int64_t k = 0;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j)
        for (int64_t l = 0; l < 5; ++l, ++k) {
          EXPECT_EQ(seen[k].first, i * 20 + j * 5 + l);
          EXPECT_EQ(seen[k].second, i * 1 + l * 3);
        }
  }
}

TEST(StridedLoop, CoalescedAxesMergeRunsAndDropUnitAxes) {
  Dims dims = {8, 4, 3, 3}, strides = {1, 0, 0, 0};  // a per-channel scale over a conv weight
  coalesce_axes<1>(dims, {&strides});
  EXPECT_EQ(dims, (Dims{8, 36}));
  EXPECT_EQ(strides, (Dims{1, 0}));
  dims = {2, 3, 4}, strides = {12, 4, 1};  // contiguous: one axis
  coalesce_axes<1>(dims, {&strides});
  EXPECT_EQ(dims, (Dims{24}));
  EXPECT_EQ(strides, (Dims{1}));
  dims = {3, 4}, strides = {1, 3};  // transposed: nothing merges
  coalesce_axes<1>(dims, {&strides});
  EXPECT_EQ(dims, (Dims{3, 4}));
  EXPECT_EQ(strides, (Dims{1, 3}));
  dims = {1, 5, 1, 2}, strides = {0, 2, 7, 1};  // size-1 axes are never stepped
  coalesce_axes<1>(dims, {&strides});
  EXPECT_EQ(dims, (Dims{10}));
  EXPECT_EQ(strides, (Dims{1}));
}

TEST(StridedLoop, CoalescedAxesVisitTheSameOffsets) {
  const Dims dims = {3, 4, 5, 2};
  for (const Dims& strides : {Dims{0, 10, 2, 1}, Dims{1, 0, 0, 0}, Dims{40, 1, 8, 4}, Dims{0, 0, 0, 0}}) {
    Dims merged_dims = dims, merged_strides = strides;
    coalesce_axes<1>(merged_dims, {&merged_strides});
    for (int64_t split : {1, 7, 120}) {
      std::vector<int64_t> want, got;
      for (int64_t begin = 0; begin < 120; begin += split) {
        const int64_t end = std::min<int64_t>(120, begin + split);
        for_each_offset<1>(dims, {&strides}, begin, end, [&](const std::array<int64_t, 1>& o) { want.push_back(o[0]); });
        for_each_offset<1>(merged_dims, {&merged_strides}, begin, end,
                           [&](const std::array<int64_t, 1>& o) { got.push_back(o[0]); });
      }
      EXPECT_EQ(got, want) << "strides " << dims_to_string(strides) << ", split " << split;
    }
  }
}

TEST(StridedLoop, RankZeroVisitsOnce) {
  int calls = 0;
  Dims none;
  for_each_offset<1>(none, {&none}, 0, 1, [&](const std::array<int64_t, 1>& o) {
    EXPECT_EQ(o[0], 0);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace kiln::cpu
