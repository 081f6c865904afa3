// ThreadPool::parallel_for: every index of the range is visited exactly once,
// chunks respect the grain, a parallel_for inside a chunk (on a worker or on
// the calling thread) runs inline instead of waiting on the busy pool, and an
// exception thrown in a chunk reaches the caller with the pool still usable.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "support/thread_pool.h"

namespace kiln::test {
namespace {

TEST(ThreadPool, VisitsEveryIndexOnceInChunksOfAtLeastTheGrain) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> seen(1000);
  std::atomic<int> short_chunks{0};
  pool.parallel_for(1000, 100, [&](int64_t b, int64_t e) {
    if (e - b < 100 && e != 1000) short_chunks.fetch_add(1);
    for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
  });
  for (const auto& s : seen) ASSERT_EQ(s.load(), 1);
  EXPECT_EQ(short_chunks.load(), 0);
}

TEST(ThreadPool, NestedParallelForRunsInlineInEveryChunk) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> seen(8 * 500);
  std::atomic<int> inner_calls{0}, inner_whole{0};
  pool.parallel_for(8, 1, [&](int64_t b, int64_t e) {
    for (int64_t outer = b; outer < e; ++outer)
      pool.parallel_for(500, 1, [&](int64_t ib, int64_t ie) {
        inner_calls.fetch_add(1);
        if (ib == 0 && ie == 500) inner_whole.fetch_add(1);  // inline: one call over the whole range
        for (int64_t i = ib; i < ie; ++i) seen[static_cast<size_t>(outer * 500 + i)].fetch_add(1);
      });
  });
  for (const auto& s : seen) ASSERT_EQ(s.load(), 1);
  EXPECT_EQ(inner_calls.load(), 8);
  EXPECT_EQ(inner_whole.load(), 8);
  // Outside any chunk the calling thread splits again.
  std::atomic<int> chunks{0};
  pool.parallel_for(4, 1, [&](int64_t, int64_t) { chunks.fetch_add(1); });
  EXPECT_EQ(chunks.load(), 4);
}

TEST(ThreadPool, ExceptionReachesTheCallerAndThePoolStaysUsable) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.parallel_for(30, 1,
                                 [&](int64_t b, int64_t) {
                                   if (b == 0) throw std::runtime_error("chunk failed");
                                 }),
               std::runtime_error);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(30, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
  });
  EXPECT_EQ(sum.load(), 435);
}

}  // namespace
}  // namespace kiln::test
