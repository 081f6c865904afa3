// Finds constant and weight-only values in one topological sweep.
#include "passes/weight_exprs.h"

namespace kiln {

WeightExprs find_weight_exprs(const Graph& graph) {
  WeightExprs out;
  for (const Value* v : graph.literals()) out.constant.insert(v);
  for (const Value* v : graph.weights()) {
    out.constant.insert(v);
    out.weight_only.insert(v);
  }
  for (const Node* node : graph.nodes()) {
    bool constant = true, reads_weight = false;
    for (const Value* in : node->inputs) {
      constant = constant && out.is_constant(in);
      reads_weight = reads_weight || out.is_weight_only(in);
    }
    if (!constant) continue;
    for (const Value* o : node->outputs) {
      out.constant.insert(o);
      if (reads_weight) out.weight_only.insert(o);
    }
  }
  return out;
}

bool is_constant_node(const WeightExprs& exprs, const Node& node) {
  for (const Value* o : node.outputs)
    if (!exprs.is_constant(o)) return false;
  return !node.outputs.empty();
}

}  // namespace kiln
