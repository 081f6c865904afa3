// Liveness: one forward walk over the nodes in schedule order.
#include "memory/liveness.h"

#include <algorithm>

#include "ops/op_def.h"
#include "support/error.h"

namespace kiln {

const ValueLiveness& Liveness::at(const Value* v) const {
  auto it = index.find(v);
  if (it == index.end()) fail(ErrorKind::runtime, "liveness: value '%", v ? v->name : "<null>", "' is not in the graph");
  return values[it->second];
}

bool is_view_value(const Value& value) {
  return value.kind == ValueKind::output && value.producer != nullptr && value.producer->op != nullptr &&
         value.producer->op->has(kView) && value.output_index == 0 && !value.producer->inputs.empty();
}

Liveness compute_liveness(const Graph& graph) {
  Liveness live;
  std::vector<Node*> nodes = graph.nodes();
  live.num_positions = static_cast<int>(nodes.size());

  auto add = [&](const Value* v, const Value* root, const Node* view_node, int def) {
    live.index.emplace(v, live.values.size());
    live.values.push_back(ValueLiveness{v, root, view_node, def, -1});
  };
  for (const Value* v : graph.inputs()) add(v, v, nullptr, -1);
  for (const Value* v : graph.weights()) add(v, v, nullptr, -1);
  for (const Value* v : graph.literals()) add(v, v, nullptr, -1);

  // A read of `v` at `pos` keeps `v` and, through views, every value up to its root alive.
  auto use = [&](const Value* v, int pos) {
    auto it = live.index.find(v);
    KILN_CHECK(it != live.index.end(), "liveness: value '%", v->name,
               "' is used before it is defined (graph not in topological order?)");
    for (;;) {
      ValueLiveness& l = live.values[it->second];
      l.last_use = std::max(l.last_use, pos);
      if (l.root == l.value) break;
      it = live.index.find(l.view_node->inputs[0]);
    }
  };

  for (int pos = 0; pos < live.num_positions; ++pos) {
    const Node* node = nodes[pos];
    for (const Value* in : node->inputs) use(in, pos);
    for (const Value* out : node->outputs) {
      if (is_view_value(*out)) {
        const Value* root = live.at(node->inputs[0]).root;
        add(out, root, node, pos);
      } else {
        add(out, out, nullptr, pos);
      }
    }
  }
  for (const Value* out : graph.outputs()) use(out, live.num_positions);
  return live;
}

}  // namespace kiln
