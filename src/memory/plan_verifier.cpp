// Memory plan verification: recomputes what must hold from the graph alone
// (it does not reuse liveness.cpp) and checks the plan against it.
#include "memory/plan_verifier.h"

#include <algorithm>
#include <unordered_map>

#include "ops/op_def.h"
#include "support/error.h"

namespace kiln {

namespace {

[[noreturn]] void bad(const auto&... parts) { fail(ErrorKind::runtime, "memory plan is invalid: ", parts...); }

const ValuePlan& placement(const MemoryPlan& plan, const Value* v) {
  const ValuePlan* p = plan.find(v);
  if (p == nullptr) bad("value '%", v->name, "' has no placement");
  if (p->value != v) bad("placement of value '%", v->name, "' names '%", p->value->name, "'");
  return *p;
}

// The value owning the bytes `v` reads, following view sources.
const ValuePlan& root_of(const MemoryPlan& plan, const Value* v) {
  const ValuePlan* p = &placement(plan, v);
  for (size_t steps = 0; p->storage == Storage::view; ++steps) {
    if (steps > plan.values.size()) bad("view chain of '%", v->name, "' has a cycle");
    p = &placement(plan, p->source);
  }
  return *p;
}

void check_live(const MemoryPlan& plan, const Value* v, int pos, const char* what) {
  const ValuePlan& r = root_of(plan, v);
  if (r.storage != Storage::arena) return;
  if (pos < r.first || pos > r.last)
    bad("arena buffer '%", r.value->name, "' is live over [", r.first, ", ", r.last, "] but ", what, " at position ",
        pos, (r.value == v ? std::string() : " through view '%" + v->name + "'"));
}

}  // namespace

void verify_memory_plan(const Graph& graph, const MemoryPlan& plan) {
  if (plan.alignment <= 0 || (plan.alignment & (plan.alignment - 1)) != 0)
    bad("alignment ", plan.alignment, " is not a power of two");
  std::vector<Node*> nodes = graph.nodes();
  const int n = static_cast<int>(nodes.size());
  if (plan.num_positions != n) bad("planned for ", plan.num_positions, " nodes, graph has ", n);

  auto check_list = [&](const std::vector<Value*>& list, Storage storage) {
    for (size_t i = 0; i < list.size(); ++i) {
      const ValuePlan& p = placement(plan, list[i]);
      if (p.storage != storage || p.index != static_cast<int>(i))
        bad("'%", list[i]->name, "' is ", storage_name(storage), " ", i, " of the graph but planned as ",
            storage_name(p.storage), " ", p.index);
    }
  };
  check_list(graph.inputs(), Storage::input);
  check_list(graph.weights(), Storage::weight);
  check_list(graph.literals(), Storage::literal);

  // Graph outputs: each slot is written in place or copied, exactly once.
  const auto& outputs = graph.outputs();
  std::vector<int> writes(outputs.size(), 0);
  for (const ValuePlan& p : plan.values) {
    if (p.storage != Storage::output) continue;
    if (p.index < 0 || p.index >= static_cast<int>(outputs.size()) || outputs[p.index] != p.value)
      bad("'%", p.value->name, "' is planned as output ", p.index, " but is not that graph output");
    ++writes[p.index];
  }
  for (const OutputCopy& c : plan.output_copies) {
    if (c.output_index < 0 || c.output_index >= static_cast<int>(outputs.size()) || outputs[c.output_index] != c.source)
      bad("copy of '%", c.source->name, "' into output ", c.output_index, " does not match the graph's outputs");
    ++writes[c.output_index];
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (writes[k] != 1) bad("graph output ", k, " ('%", outputs[k]->name, "') is written ", writes[k], " times");
    if (placement(plan, outputs[k]).storage == Storage::arena)
      bad("graph output ", k, " ('%", outputs[k]->name, "') is in the arena");
  }

  // Node outputs: views and arena buffers.
  std::vector<const ValuePlan*> arena;
  for (int pos = 0; pos < n; ++pos) {
    const Node* node = nodes[pos];
    for (const Value* out : node->outputs) {
      const ValuePlan& p = placement(plan, out);
      bool view = node->op->has(kView) && out->output_index == 0 && !node->inputs.empty();
      if (view) {
        if (p.storage != Storage::view) bad("view '%", out->name, "' of node '", node->name, "' is not planned as a view");
        if (p.source != node->inputs[0]) bad("view '%", out->name, "' does not alias its node's input 0");
        const ValuePlan& r = root_of(plan, out);
        if (p.root != r.value) bad("view '%", out->name, "' names root '%", p.root->name, "', its chain ends at '%",
                                   r.value->name, "'");
        int64_t span = out->type.storage_bytes();
        int64_t root_span = r.value->type.storage_bytes();
        if (span > 0 && (p.root_byte_offset < 0 || p.root_byte_offset + span > root_span))
          bad("view '%", out->name, "' spans bytes [", p.root_byte_offset, ", ", p.root_byte_offset + span,
              ") of '%", r.value->name, "', which has ", root_span);
        continue;
      }
      if (p.storage != Storage::arena && p.storage != Storage::output)
        bad("node output '%", out->name, "' is planned as ", storage_name(p.storage));
      int64_t need = out->type.numel() * static_cast<int64_t>(dtype_size(out->type.dtype));
      if (p.bytes < need) bad("'%", out->name, "' needs ", need, " bytes, planned ", p.bytes);
      if (p.storage == Storage::output) continue;
      if (p.offset < 0 || p.offset % plan.alignment != 0)
        bad("arena buffer '%", out->name, "' at offset ", p.offset, " is not aligned to ", plan.alignment);
      if (p.offset + p.bytes > plan.arena_bytes)
        bad("arena buffer '%", out->name, "' [", p.offset, ", ", p.offset + p.bytes, ") ends past the arena (",
            plan.arena_bytes, " bytes)");
      if (p.first > pos || p.last < pos) bad("arena buffer '%", out->name, "' is written at position ", pos,
                                             " outside its interval [", p.first, ", ", p.last, "]");
      arena.push_back(&p);
    }
  }
  // Reads keep buffers alive.
  for (int pos = 0; pos < n; ++pos)
    for (const Value* in : nodes[pos]->inputs) check_live(plan, in, pos, ("read by node '" + nodes[pos]->name + "'").c_str());
  for (const Value* out : outputs) check_live(plan, out, n, "read as a graph output");

  // No two simultaneously live arena buffers share a byte.
  std::sort(arena.begin(), arena.end(), [](const ValuePlan* a, const ValuePlan* b) { return a->offset < b->offset; });
  for (size_t i = 0; i < arena.size(); ++i) {
    const ValuePlan& a = *arena[i];
    if (a.bytes == 0) continue;
    for (size_t j = i + 1; j < arena.size() && arena[j]->offset < a.offset + a.bytes; ++j) {
      const ValuePlan& b = *arena[j];
      if (b.bytes == 0) continue;
      if (a.first <= b.last && b.first <= a.last)
        bad("arena buffers '%", a.value->name, "' [", a.offset, ", ", a.offset + a.bytes, ") live [", a.first, ", ",
            a.last, "] and '%", b.value->name, "' [", b.offset, ", ", b.offset + b.bytes, ") live [", b.first, ", ",
            b.last, "] overlap");
    }
  }
}

}  // namespace kiln
