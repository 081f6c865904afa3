// for_each_offset visits every element once with the right offsets, for
// broadcast and transposed operands and for split ranges.
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
