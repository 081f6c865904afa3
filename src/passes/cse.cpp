// Common subexpression elimination. Literals with equal type and bytes are
// merged first, so that nodes reading equal constants then match. A node
// matches an earlier one with the same op, inputs (for commutative binary
// ops, in either order), attrs and output types; its uses move to the earlier
// node (which comes first in topological order, so order stays valid).
#include <map>
#include <sstream>

#include "ops/op_def.h"
#include "passes/passes.h"

namespace kiln {

namespace {

bool both_outputs(const Graph& graph, const Value* keep, const Value* dup) {
  return graph.is_graph_output(keep) && graph.is_graph_output(dup);
}

bool merge_literals(Graph& graph) {
  bool changed = false;
  std::map<std::pair<std::string, std::vector<uint8_t>>, Value*> seen;
  std::vector<Value*> literals = graph.literals();
  for (Value* lit : literals) {
    auto key = std::make_pair(to_string(lit->type), lit->literal_data);
    auto [it, inserted] = seen.emplace(std::move(key), lit);
    if (inserted || both_outputs(graph, it->second, lit)) continue;
    graph.replace_all_uses(lit, it->second);
    graph.erase_value(lit);
    changed = true;
  }
  return changed;
}

// A text key naming everything that decides a node's results.
std::string node_key(const Node& node) {
  std::ostringstream key;
  key << node.op->name << '(';
  std::vector<const Value*> inputs(node.inputs.begin(), node.inputs.end());
  if (node.op->has(kCommutative) && inputs.size() == 2 && inputs[1]->name < inputs[0]->name)
    std::swap(inputs[0], inputs[1]);
  for (const Value* v : inputs) key << '%' << v->name << ',';
  key << '|';
  for (const auto& [name, value] : node.attrs.items()) key << name << '=' << attr_to_string(value) << ',';
  key << '|';
  for (const Value* v : node.outputs) key << to_string(v->type) << ',';
  return key.str();
}

}  // namespace

bool cse(Graph& graph) {
  bool changed = merge_literals(graph);
  std::map<std::string, Node*> seen;
  for (Node* node : graph.nodes()) {
    if (node->op->has(kFusedGroup) || node->body) continue;
    auto [it, inserted] = seen.emplace(node_key(*node), node);
    if (inserted) continue;
    Node* keep = it->second;
    bool blocked = false;
    for (size_t i = 0; i < node->outputs.size(); ++i)
      blocked = blocked || both_outputs(graph, keep->outputs[i], node->outputs[i]);
    if (blocked) continue;
    for (size_t i = 0; i < node->outputs.size(); ++i) graph.replace_all_uses(node->outputs[i], keep->outputs[i]);
    graph.erase_node(node);
    changed = true;
  }
  return changed;
}

}  // namespace kiln
