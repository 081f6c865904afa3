// Greedy-by-size arena packing (best fit and first fit).
//
// Buffers are placed from the largest to the smallest. For each buffer we
// collect the already placed buffers whose live intervals intersect its own
// (only those constrain it: buffers that are never alive together may share
// bytes), sort them by offset, and walk the gaps between them. Placing large
// buffers first keeps the big ones packed at low offsets and lets small ones
// fill the holes between them, which is close to optimal on real networks and
// costs O(n^2) in the number of buffers, fine for graphs of a few thousand
// nodes.
#include "memory/arena_strategy.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "support/error.h"

namespace kiln {

std::string_view strategy_name(ArenaStrategy strategy) {
  switch (strategy) {
    case ArenaStrategy::greedy_by_size_best_fit: return "greedy_by_size_best_fit";
    case ArenaStrategy::greedy_by_size_first_fit: return "greedy_by_size_first_fit";
  }
  return "?";
}

int64_t align_up(int64_t bytes, int64_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

ArenaAssignment assign_offsets(std::span<const ArenaRequest> requests, int64_t alignment, ArenaStrategy strategy) {
  KILN_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0, "arena alignment must be a power of two, got ",
             alignment);
  const size_t n = requests.size();
  ArenaAssignment result;
  result.offsets.assign(n, 0);
  std::vector<int64_t> sizes(n);
  for (size_t i = 0; i < n; ++i) {
    KILN_CHECK(requests[i].bytes >= 0, "arena request ", i, " has negative size ", requests[i].bytes);
    KILN_CHECK(requests[i].first <= requests[i].last, "arena request ", i, " has an empty live interval [",
               requests[i].first, ", ", requests[i].last, "]");
    sizes[i] = align_up(requests[i].bytes, alignment);
  }

  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });

  std::vector<size_t> placed;  // indices already placed
  placed.reserve(n);
  std::vector<size_t> conflicts;
  for (size_t id : order) {
    if (sizes[id] == 0) continue;
    const ArenaRequest& r = requests[id];
    conflicts.clear();
    for (size_t other : placed)
      if (requests[other].first <= r.last && r.first <= requests[other].last) conflicts.push_back(other);
    std::sort(conflicts.begin(), conflicts.end(), [&](size_t a, size_t b) {
      return result.offsets[a] != result.offsets[b] ? result.offsets[a] < result.offsets[b] : a < b;
    });

    // Walk the gaps in offset order; `cursor` is the end of the occupied prefix.
    int64_t cursor = 0;
    int64_t best_offset = -1;
    int64_t best_gap = std::numeric_limits<int64_t>::max();
    for (size_t other : conflicts) {
      int64_t start = result.offsets[other];
      if (start > cursor) {
        int64_t gap = start - cursor;
        if (gap >= sizes[id]) {
          if (strategy == ArenaStrategy::greedy_by_size_first_fit) {
            best_offset = cursor;
            break;
          }
          if (gap < best_gap) {
            best_gap = gap;
            best_offset = cursor;
          }
        }
      }
      cursor = std::max(cursor, start + sizes[other]);
    }
    result.offsets[id] = best_offset >= 0 ? best_offset : cursor;
    result.arena_bytes = std::max(result.arena_bytes, result.offsets[id] + sizes[id]);
    placed.push_back(id);
  }
  return result;
}

}  // namespace kiln
