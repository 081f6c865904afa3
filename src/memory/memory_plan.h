// The memory plan of a graph: where every value's bytes live during a call.
// It is plain data, computed once when an executable is built, printed by
// to_string and checked by verify_memory_plan (plan_verifier.h). See
// memory_plan.cpp for how it is made and Note [Memory plan] for the rules.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "memory/arena_strategy.h"

namespace kiln {

// Where a value lives.
enum class Storage : uint8_t {
  input,    // the caller's tensor for graph input `index`
  weight,   // the tensor bound to weight `index` of graph.weights() (by pointer)
  literal,  // the bytes of literal `index` of graph.literals(), kept by the executable
  arena,    // [offset, offset + bytes) of the arena
  view,     // aliases `source` at `view_offset` elements from its data pointer
  output,   // the caller's buffer for graph output `index`
};
std::string_view storage_name(Storage storage);

struct ValuePlan {
  const Value* value = nullptr;
  Storage storage = Storage::arena;
  int index = -1;      // input, weight, literal and output: the position in the graph's list
  int64_t offset = 0;  // arena: byte offset, a multiple of the plan's alignment
  int64_t bytes = 0;   // arena and output: bytes written by the producing kernel (contiguous)
  int first = -1;      // arena: live interval [first, last] in node positions (liveness.h)
  int last = -1;
  // Views only:
  const Value* source = nullptr;  // the view node's input 0
  int64_t view_offset = 0;        // elements (of source's dtype) from source's data pointer
  const Value* root = nullptr;    // the non-view value at the end of the chain of sources
  int64_t root_byte_offset = 0;   // bytes from root's data pointer
};

// A graph output whose value is not written by a kernel straight into the
// caller's buffer (an input, weight, literal, view, or a value returned twice)
// is copied there after all kernels ran: Note [Output copies].
struct OutputCopy {
  int output_index = 0;
  const Value* source = nullptr;
};

struct MemoryPlan {
  int64_t alignment = 64;
  int64_t arena_bytes = 0;
  ArenaStrategy strategy = ArenaStrategy::greedy_by_size_best_fit;
  int num_positions = 0;  // number of nodes
  std::vector<ValuePlan> values;  // inputs, weights, literals, then node outputs in node order
  std::vector<OutputCopy> output_copies;
  std::unordered_map<const Value*, size_t> index;

  const ValuePlan* find(const Value* v) const;
  const ValuePlan& at(const Value* v) const;  // throws naming the value when absent
  // Sum of the aligned sizes of all arena buffers: the arena without any reuse.
  int64_t unshared_bytes() const;
};

struct PlanOptions {
  int64_t alignment = 64;  // bytes; a power of two
  ArenaStrategy strategy = ArenaStrategy::greedy_by_size_best_fit;
};

// Plans `graph` in its current node order. Throws kiln::Error naming the value
// at fault (e.g. a node output that is not contiguous and not a view).
MemoryPlan plan_memory(const Graph& graph, const PlanOptions& options = {});

// One line per value plus a header and the output copies, e.g.
//   memory plan: arena 128 bytes, alignment 64, greedy_by_size_best_fit (192 bytes without reuse)
//     %x      input 0      f32[2,3]
//     %v0     arena [0, 64) live [0, 1]  f32[2,3]
//     %v1     view of %v0 +0 (root %v0 +0 bytes)  f32[6]
//     %v2     output 0     f32[2,3]
//     copy %x -> output 1
std::string to_string(const MemoryPlan& plan);

}  // namespace kiln
