// Memory planning: give every value of a scheduled graph a place to live, and
// pack the short-lived intermediates into one arena.
//
// Note [Memory plan]
// ~~~~~~~~~~~~~~~~~~
// A compiled graph is called many times. Allocating each intermediate tensor
// on every call would cost an allocator round trip per node and, worse, hold
// every intermediate until the call ends. Instead, the executable owns one
// block of memory, the arena, allocated once, and every intermediate result
// of a call lives at a fixed byte offset inside it. Two intermediates may share
// bytes when they are never alive at the same time, so the arena is usually
// much smaller than the sum of the intermediates: for a chain of N layers it
// is about the size of the two largest neighbours, not of all N.
//
// The pass works on the graph in its current node order (the schedule; the
// planner never reorders) and has three steps.
//
// 1. Classify (this file). Values that are not the planner's to place:
//      - graph inputs and weights live in tensors the caller owns and binds
//        by pointer (Note [Weights] in DESIGN.md): never in the arena;
//      - literals live in the bytes the IR already holds;
//      - node outputs that are graph outputs are written by their kernel
//        straight into the caller's output buffer. They are never in the
//        arena, so a result handed to the caller can never be overwritten
//        by the next call.
//    View outputs (ops with OpTrait kView) own no storage: they alias their
//    input 0 at an element offset given by view_offset (ops/view_offset.h),
//    and through chains of views, a root value. Every other node output gets
//    a buffer of numel * itemsize bytes (node outputs are contiguous).
//
// 2. Liveness (liveness.cpp). Walking the nodes in order, a buffer is alive
//    from the node that writes it to the last node that reads it, where a read
//    of a view is a read of its root. Intervals are closed: a node's inputs
//    are still alive while it writes its outputs, so a kernel never has its
//    output placed on top of one of its inputs.
//
// 3. Packing (arena_strategy.cpp). The arena buffers and their intervals go to
//    a strategy that chooses offsets (greedy by size, best fit by default)
//    with every offset aligned to 64 bytes. The result is verified
//    (plan_verifier.cpp) by re-deriving liveness independently and checking
//    that no two buffers alive at the same position share a byte.
//
// Note [Output copies]
// ~~~~~~~~~~~~~~~~~~~~
// A graph output that no kernel writes (a graph input or weight returned as
// is, a literal, a view, or the second occurrence of a value returned twice)
// cannot be produced in place. The plan lists such outputs in
// `output_copies`; after all kernels have run, the executable copies the
// source (read through its own strides) into the caller's contiguous output
// buffer. Liveness treats graph outputs as read at position N (after the last
// node), so the bytes a copy reads, including a view's root in the arena, are
// still intact when the copy runs.
#include "memory/memory_plan.h"

#include <iomanip>
#include <sstream>

#include "memory/liveness.h"
#include "ops/op_def.h"
#include "ops/view_offset.h"
#include "support/error.h"

namespace kiln {

std::string_view storage_name(Storage storage) {
  switch (storage) {
    case Storage::input: return "input";
    case Storage::weight: return "weight";
    case Storage::literal: return "literal";
    case Storage::arena: return "arena";
    case Storage::view: return "view";
    case Storage::output: return "output";
  }
  return "?";
}

const ValuePlan* MemoryPlan::find(const Value* v) const {
  auto it = index.find(v);
  return it == index.end() ? nullptr : &values[it->second];
}

const ValuePlan& MemoryPlan::at(const Value* v) const {
  const ValuePlan* p = find(v);
  if (p == nullptr) fail(ErrorKind::runtime, "memory plan: value '%", v ? v->name : "<null>", "' has no placement");
  return *p;
}

int64_t MemoryPlan::unshared_bytes() const {
  int64_t total = 0;
  for (const ValuePlan& p : values)
    if (p.storage == Storage::arena) total += align_up(p.bytes, alignment);
  return total;
}

MemoryPlan plan_memory(const Graph& graph, const PlanOptions& options) {
  KILN_CHECK(options.alignment > 0 && (options.alignment & (options.alignment - 1)) == 0,
             "memory plan: alignment must be a power of two, got ", options.alignment);
  Liveness live = compute_liveness(graph);
  MemoryPlan plan;
  plan.alignment = options.alignment;
  plan.strategy = options.strategy;
  plan.num_positions = live.num_positions;

  auto add = [&](ValuePlan p) {
    plan.index.emplace(p.value, plan.values.size());
    plan.values.push_back(std::move(p));
  };
  auto add_list = [&](const std::vector<Value*>& list, Storage storage) {
    for (size_t i = 0; i < list.size(); ++i) {
      ValuePlan p;
      p.value = list[i];
      p.storage = storage;
      p.index = static_cast<int>(i);
      p.root = list[i];
      add(p);
    }
  };
  add_list(graph.inputs(), Storage::input);
  add_list(graph.weights(), Storage::weight);
  add_list(graph.literals(), Storage::literal);

  // The first graph output slot of each value (later slots are copies).
  std::unordered_map<const Value*, int> output_slot;
  for (size_t k = 0; k < graph.outputs().size(); ++k) output_slot.emplace(graph.outputs()[k], static_cast<int>(k));

  std::vector<ArenaRequest> requests;
  std::vector<size_t> request_value;  // plan.values index of each request
  for (const ValueLiveness& l : live.values) {
    const Value* v = l.value;
    if (v->kind != ValueKind::output) continue;
    ValuePlan p;
    p.value = v;
    p.root = l.root;
    if (l.view_node != nullptr) {
      const Value* source = l.view_node->inputs[0];
      const ValuePlan& src = plan.at(source);
      p.storage = Storage::view;
      p.source = source;
      p.view_offset = view_offset(*l.view_node);
      p.root_byte_offset = (src.storage == Storage::view ? src.root_byte_offset : 0) +
                           p.view_offset * static_cast<int64_t>(dtype_size(source->type.dtype));
      add(p);
      continue;
    }
    KILN_CHECK(v->type.numel() == 0 || v->type.is_contiguous(), "memory plan: node output '%", v->name,
               "' of type ", to_string(v->type), " is not contiguous and its op '", v->producer ? v->producer->op->name : "?", "' is not a view");
    p.bytes = v->type.numel() * static_cast<int64_t>(dtype_size(v->type.dtype));
    auto slot = output_slot.find(v);
    if (slot != output_slot.end()) {
      p.storage = Storage::output;
      p.index = slot->second;
    } else {
      p.storage = Storage::arena;
      p.first = l.def;
      p.last = std::max(l.def, l.last_use);  // an unread output still needs its bytes while written
      requests.push_back(ArenaRequest{p.bytes, p.first, p.last});
      request_value.push_back(plan.values.size());
    }
    add(p);
  }

  ArenaAssignment assignment = assign_offsets(requests, options.alignment, options.strategy);
  for (size_t i = 0; i < requests.size(); ++i) plan.values[request_value[i]].offset = assignment.offsets[i];
  plan.arena_bytes = assignment.arena_bytes;

  for (size_t k = 0; k < graph.outputs().size(); ++k) {
    const Value* v = graph.outputs()[k];
    const ValuePlan& p = plan.at(v);
    if (p.storage == Storage::output && p.index == static_cast<int>(k)) continue;
    plan.output_copies.push_back(OutputCopy{static_cast<int>(k), v});
  }
  return plan;
}

std::string to_string(const MemoryPlan& plan) {
  std::ostringstream out;
  out << "memory plan: arena " << plan.arena_bytes << " bytes, alignment " << plan.alignment << ", "
      << strategy_name(plan.strategy) << " (" << plan.unshared_bytes() << " bytes without reuse)\n";
  size_t width = 0;
  for (const ValuePlan& p : plan.values) width = std::max(width, p.value->name.size() + 1);
  for (const ValuePlan& p : plan.values) {
    std::ostringstream where;
    switch (p.storage) {
      case Storage::input:
      case Storage::literal:
      case Storage::output: where << storage_name(p.storage) << " " << p.index; break;
      case Storage::weight: where << "weight " << p.index << " \"" << p.value->weight_key << "\""; break;
      case Storage::arena:
        where << "arena [" << p.offset << ", " << p.offset + p.bytes << ") live [" << p.first << ", " << p.last
              << "]";
        break;
      case Storage::view:
        where << "view of %" << p.source->name << " +" << p.view_offset << " (root %" << p.root->name << " +"
              << p.root_byte_offset << " bytes)";
        break;
    }
    out << "  " << std::left << std::setw(static_cast<int>(width)) << ("%" + p.value->name) << "  "
        << std::setw(28) << where.str() << "  " << to_string(p.value->type) << "\n";
  }
  for (const OutputCopy& c : plan.output_copies)
    out << "  copy %" << c.source->name << " -> output " << c.output_index << "\n";
  return out.str();
}

}  // namespace kiln
