// Arena strategies: given buffers with sizes and live intervals, choose byte
// offsets in one arena so that buffers alive at the same time never overlap.
// This is the pure packing problem, independent of graphs; memory_plan.cpp
// turns a graph into requests and the offsets back into a MemoryPlan.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace kiln {

// One buffer to place: `bytes` of storage alive over node positions
// [first, last] (inclusive; two buffers conflict when their intervals intersect).
struct ArenaRequest {
  int64_t bytes = 0;
  int first = 0;
  int last = 0;
};

enum class ArenaStrategy : uint8_t {
  // Largest buffers first; each goes into the smallest gap between already
  // placed, conflicting buffers that fits it (lowest offset on ties), or after
  // the highest of them when no gap fits.
  greedy_by_size_best_fit,
  // Largest buffers first; each goes at the lowest offset that fits.
  greedy_by_size_first_fit,
};

std::string_view strategy_name(ArenaStrategy strategy);

struct ArenaAssignment {
  std::vector<int64_t> offsets;  // one per request, multiples of the alignment
  int64_t arena_bytes = 0;       // end of the highest buffer, rounded up to the alignment
};

// Rounds `bytes` up to a multiple of `alignment` (a power of two).
int64_t align_up(int64_t bytes, int64_t alignment);

// Places every request; sizes are rounded up to `alignment` (a power of two)
// so every offset stays aligned. Zero-byte requests get offset 0 and occupy
// nothing. Deterministic: ties are broken by request order.
ArenaAssignment assign_offsets(std::span<const ArenaRequest> requests, int64_t alignment, ArenaStrategy strategy);

}  // namespace kiln
