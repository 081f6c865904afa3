// pair_copies: contiguous copies of values of one type (dims, dtype and
// strides) become one `copies` node, so a backend moves them in one launch.
// A decoder's attention makes two per layer: its key and value outputs, each a
// contiguous copy of a strided view of the packed q/k/v projection (GPT-2's
// present key/value tensors). On CUDA every launch costs a few microseconds
// of graph time at small batches whatever it moves.
//
// A later copy B joins an earlier copy (or copies node) A of the same input
// type whose input is a view of the same value as B's (so no buffer lives
// longer than before: copies of other layers' values stay apart, which would
// keep one layer's projection alive into the next). The merged node takes A's
// place when B's input is computed before A (B's result is only ready earlier
// than before), else B's place when nothing reads A's results before B (they
// are only ready later). At most kMaxCopies members per node. Values keep
// their names.
#include <unordered_map>

#include "ops/op_def.h"
#include "passes/passes.h"
#include "passes/rewrite.h"

namespace kiln {

namespace {

constexpr size_t kMaxCopies = 4;

using Positions = std::unordered_map<const Node*, size_t>;

// The value `v` is a view of (itself when it is not a view).
const Value* view_root(const Value* v) {
  while (v->producer != nullptr && v->producer->op->has(kView) && !v->producer->inputs.empty())
    v = v->producer->inputs[0];
  return v;
}

// Where the node merging copy `b` into the earlier copy `a` can go (a or b), or null.
Node* merge_point(Node* a, Node* b, const Positions& position) {
  const Value* x = b->inputs[0];
  if (a->inputs.size() >= kMaxCopies || a->inputs[0]->type != x->type) return nullptr;
  if (view_root(a->inputs[0]) != view_root(x)) return nullptr;
  if (x->producer == nullptr || position.at(x->producer) < position.at(a)) return a;
  for (const Value* out : a->outputs)
    for (const Node* user : out->users)
      if (position.at(user) < position.at(b)) return nullptr;
  return b;
}

// Merges one later contiguous node into an earlier copy; false when none can.
bool pair_one(Graph& graph) {
  Positions position;
  std::vector<Node*> copies;  // contiguous and copies nodes, in order
  for (Node* n : graph.nodes()) {
    position.emplace(n, position.size());
    if (n->op->name == "contiguous" || n->op->name == "copies") copies.push_back(n);
  }
  for (size_t j = 1; j < copies.size(); ++j) {
    Node* b = copies[j];
    if (b->op->name != "contiguous") continue;
    for (size_t i = 0; i < j; ++i) {
      Node* a = copies[i];
      Node* at = merge_point(a, b, position);
      if (at == nullptr) continue;
      std::vector<Value*> inputs = a->inputs;
      inputs.push_back(b->inputs[0]);
      Node* merged = graph.add_node(get_op("copies"), inputs, {}, "", at);
      std::vector<Value*> old = a->outputs;
      old.push_back(b->outputs[0]);
      std::vector<std::string> names;
      for (Value* v : old) names.push_back(v->name);
      const std::string node_name = a->name;
      for (size_t k = 0; k < old.size(); ++k) graph.replace_all_uses(old[k], merged->outputs[k]);
      graph.erase_node(b);
      graph.erase_node(a);
      for (size_t k = 0; k < old.size(); ++k) graph.rename(merged->outputs[k], names[k]);
      merged->name = node_name;
      return true;
    }
  }
  return false;
}

}  // namespace

bool pair_copies(Graph& graph) {
  bool changed = false;
  while (pair_one(graph)) changed = true;
  return changed;
}

}  // namespace kiln
