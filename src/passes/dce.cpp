// Dead code elimination: drops nodes whose results nobody reads, then
// literals and weights nobody reads. Graph inputs stay (they are the call's
// positional signature); see passes.h for why unused weights may go.
#include "passes/passes.h"

namespace kiln {

namespace {
bool is_dead(const Graph& graph, const Value* v) { return v->users.empty() && !graph.is_graph_output(v); }
}  // namespace

bool dce(Graph& graph) {
  bool changed = false;
  // Reverse topological order: erasing a user may make its producers dead,
  // and those come earlier, so one sweep finds everything.
  std::vector<Node*> nodes = graph.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* node = *it;
    bool dead = true;
    for (const Value* out : node->outputs) dead = dead && is_dead(graph, out);
    if (!dead) continue;
    graph.erase_node(node);
    changed = true;
  }
  for (const std::vector<Value*>* list : {&graph.literals(), &graph.weights()}) {
    std::vector<Value*> values = *list;
    for (Value* v : values) {
      if (!is_dead(graph, v)) continue;
      graph.erase_value(v);
      changed = true;
    }
  }
  return changed;
}

}  // namespace kiln
