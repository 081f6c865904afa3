// find_concurrent_matmuls (concurrent_matmuls.h).
#include "runtime/concurrent_matmuls.h"

#include <unordered_set>

#include "memory/liveness.h"
#include "ops/op_def.h"

namespace kiln {

namespace {

bool is_product(const Node& node) { return node.op->name == "matmul" || node.op->name == "matmul_epilogue"; }

bool is_view_node(const Node& node) { return !node.outputs.empty() && is_view_value(*node.outputs[0]); }

// The value whose storage `v` uses: itself, or the source at the end of its chain of views.
const Value* root_of(const Value* v) {
  while (v->producer != nullptr && is_view_value(*v)) v = v->producer->inputs[0];
  return v;
}

}  // namespace

std::vector<ConcurrentSpan> find_concurrent_matmuls(const Graph& graph, int max_branches) {
  std::vector<ConcurrentSpan> spans;
  ConcurrentSpan open;
  std::unordered_set<const Value*> written;  // the open span's results
  auto close = [&] {
    if (open.branches >= 2) spans.push_back(open);
    open = ConcurrentSpan{};
    written.clear();
  };
  const auto& nodes = graph.nodes();
  for (int pos = 0; pos < static_cast<int>(nodes.size()); ++pos) {
    const Node& node = *nodes[pos];
    if (is_view_node(node)) continue;
    bool joins = is_product(node) && open.branches > 0 && open.branches < max_branches;
    for (const Value* in : node.inputs) joins = joins && written.count(root_of(in)) == 0;
    if (!joins) {
      close();
      if (!is_product(node)) continue;
      open.first = pos;
    }
    open.last = pos;
    ++open.branches;
    for (const Value* out : node.outputs) written.insert(out);
  }
  close();
  return spans;
}

}  // namespace kiln
