// split_weight_folds (Note [Weight folds] in weight_folds.h): finds the fold
// points, copies each one's backward slice into a fold graph, and replaces the
// folded value in the main graph by a "fold:<n>" weight; dce drops the slice.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ops/op_def.h"
#include "passes/passes.h"
#include "passes/weight_exprs.h"
#include "passes/weight_folds.h"

namespace kiln {

namespace {

int64_t bytes_of(const TensorType& t) { return t.numel() * static_cast<int64_t>(dtype_size(t.dtype)); }

// Whether `v` is read by the activation path (or is a graph output), directly
// or through a chain of constant views.
bool reaches_activations(const Graph& graph, const WeightExprs& exprs, const Value* v) {
  if (graph.is_graph_output(v)) return true;
  for (const Node* user : v->users) {
    if (!is_constant_node(exprs, *user)) return true;
    if (user->op->has(kView) && reaches_activations(graph, exprs, user->outputs[0])) return true;
  }
  return false;
}

// The nodes `v` is computed from, in topological order, and the weights they read.
struct Slice {
  std::vector<const Node*> nodes;
  std::vector<const Value*> weights;
};

Slice slice_of(const Graph& graph, const Value* v) {
  std::unordered_set<const Node*> in_slice;
  std::unordered_set<const Value*> seen;
  std::vector<const Value*> stack = {v};
  while (!stack.empty()) {
    const Value* x = stack.back();
    stack.pop_back();
    if (!seen.insert(x).second || x->producer == nullptr) continue;
    in_slice.insert(x->producer);
    for (const Value* in : x->producer->inputs) stack.push_back(in);
  }
  Slice slice;
  for (const Node* node : graph.nodes())
    if (in_slice.count(node)) slice.nodes.push_back(node);
  for (const Value* w : graph.weights())
    if (seen.count(w)) slice.weights.push_back(w);
  return slice;
}

bool pays(const Value* v, const Slice& slice) {
  int64_t source_bytes = 0;
  for (const Value* w : slice.weights) source_bytes += bytes_of(w->type);
  return bytes_of(v->type) <= source_bytes;
}

std::unique_ptr<Graph> fold_graph(const Value* v, const Slice& slice) {
  auto g = std::make_unique<Graph>();
  std::unordered_map<const Value*, Value*> map;
  for (const Value* w : slice.weights) map[w] = g->add_input(w->name, w->type);
  auto get = [&](const Value* x) {
    auto it = map.find(x);
    if (it != map.end()) return it->second;
    // Only literals remain: copy them in.
    Value* lit = g->add_literal(x->name, x->type, x->literal_data);
    map[x] = lit;
    return lit;
  };
  for (const Node* node : slice.nodes) {
    std::vector<Value*> ins;
    for (const Value* in : node->inputs) ins.push_back(get(in));
    std::vector<TensorType> types;
    std::vector<std::string> names;
    for (const Value* o : node->outputs) {
      types.push_back(o->type);
      names.push_back(o->name);
    }
    Node* copy = g->add_node_typed(*node->op, std::move(ins), node->attrs, std::move(types), std::move(names), node->name);
    copy->body = node->body ? node->body->clone() : nullptr;
    for (size_t i = 0; i < node->outputs.size(); ++i) map[node->outputs[i]] = copy->outputs[i];
  }
  g->set_outputs({map.at(v)});
  return g;
}

int next_fold_index(const Graph& graph) {
  int next = 0;
  for (const Value* w : graph.weights()) {
    if (!w->weight_key.starts_with(kFoldKeyPrefix)) continue;
    try {
      next = std::max(next, std::stoi(w->weight_key.substr(kFoldKeyPrefix.size())) + 1);
    } catch (...) {
    }
  }
  return next;
}

}  // namespace

std::vector<FoldedConstant> split_weight_folds(Graph& graph) {
  WeightExprs exprs = find_weight_exprs(graph);
  std::vector<Value*> points;
  for (const Node* node : graph.nodes()) {
    if (node->op->has(kView) || !is_constant_node(exprs, *node)) continue;
    for (Value* out : node->outputs)
      if (exprs.is_weight_only(out) && reaches_activations(graph, exprs, out)) points.push_back(out);
  }
  std::vector<FoldedConstant> folds;
  std::vector<Value*> folded;
  int index = next_fold_index(graph);
  for (Value* v : points) {
    Slice slice = slice_of(graph, v);
    if (!pays(v, slice)) continue;
    FoldedConstant fold;
    fold.key = std::string(kFoldKeyPrefix) + std::to_string(index++);
    fold.graph = fold_graph(v, slice);
    for (const Value* w : slice.weights) fold.source_keys.push_back(w->weight_key);
    folds.push_back(std::move(fold));
    folded.push_back(v);
  }
  // Replace only after every slice was copied: slices may share nodes.
  for (size_t i = 0; i < folded.size(); ++i) {
    Value* w = graph.add_weight(graph.fresh_name("fold"), folded[i]->type, folds[i].key);
    graph.replace_all_uses(folded[i], w);
  }
  if (!folds.empty()) dce(graph);
  return folds;
}

}  // namespace kiln
