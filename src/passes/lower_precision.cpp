// Lower precision (the precision option): run an f32 graph's floating math in
// f16 or bf16 while keeping its signature. Graph inputs of dtype `from` are
// cast down where the call enters, every node on the activation path is
// retyped (attrs naming `from`, such as a cast's target, name `to` instead),
// and outputs that became `to` are cast back to `from` before they leave.
//
// Constant expressions (weights, literals and what is computed from them
// alone) keep their dtype: a cast is inserted where such a value feeds the
// activation path, below any views on the way, so that
//   - a weight's cast sits directly on the weight (or on a weight-only result
//     such as a batch norm folded into a convolution, computed in full
//     precision first), and split_weight_folds folds it into one
//     half-precision constant: the call pays nothing for it;
//   - a view of a weight (a transposed GEMM weight) stays a view, now of the
//     folded constant.
#include <unordered_map>

#include "ops/op_def.h"
#include "passes/passes.h"
#include "passes/weight_exprs.h"

namespace kiln {

namespace {

class Lowering {
 public:
  Lowering(Graph& graph, DType from, DType to) : graph_(graph), from_(from), to_(to), exprs_(find_weight_exprs(graph)) {}

  bool run() {
    std::vector<DType> output_dtypes;
    for (const Value* v : graph_.outputs()) output_dtypes.push_back(v->type.dtype);
    std::vector<Node*> nodes = graph_.nodes();
    if (nodes.empty()) return false;
    bool changed = lower_inputs(nodes.front());
    for (Node* node : nodes) {
      if (is_constant_node(exprs_, *node) || is_cast(*node, to_, from_)) continue;
      changed = retype(node) || changed;
    }
    std::vector<Value*> outputs = graph_.outputs();
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i]->type.dtype == output_dtypes[i]) continue;
      outputs[i] = cast(outputs[i], output_dtypes[i], nullptr);
      changed = true;
    }
    graph_.set_outputs(outputs);
    return changed;
  }

 private:
  // A cast from `src` to `dst`: an entry cast (from, to) or an exit cast (to,
  // from) that an earlier run inserted, left alone so the pass is idempotent.
  static bool is_cast(const Node& node, DType src, DType dst) {
    return node.op->name == "cast" && node.inputs[0]->type.dtype == src && node.attrs.get_dtype("dtype") == dst;
  }

  Value* cast(Value* v, DType dtype, const Node* before) {
    Attrs a;
    a.set("dtype", dtype);
    return graph_.add_node(get_op("cast"), {v}, std::move(a), "", before)->outputs[0];
  }

  // Inputs of dtype `from` are cast once, before the first node.
  bool lower_inputs(const Node* first) {
    bool changed = false;
    for (Value* in : graph_.inputs()) {
      if (in->type.dtype != from_ || in->users.empty()) continue;
      std::vector<Node*> users;
      for (Node* user : in->users)
        if (!is_cast(*user, from_, to_)) users.push_back(user);
      if (users.empty()) continue;
      Value* low = cast(in, to_, first);
      for (Node* user : users)
        for (size_t i = 0; i < user->inputs.size(); ++i)
          if (user->inputs[i] == in) graph_.set_node_input(user, i, low);
      changed = true;
    }
    return changed;
  }

  // The `to` version of constant `v`, placed before `user`: views are
  // re-applied on top of the lowered base, so the cast sits below them.
  Value* lowered_constant(Value* v, const Node* user) {
    auto it = lowered_.find(v);
    if (it != lowered_.end()) return it->second;
    Value* out;
    const Node* producer = v->producer;
    if (producer != nullptr && producer->op->has(kView) && producer->inputs.size() == 1) {
      Value* base = lowered_constant(producer->inputs[0], user);
      out = graph_.add_node(*producer->op, {base}, producer->attrs, "", user)->outputs[0];
    } else {
      out = cast(v, to_, user);
    }
    lowered_[v] = out;
    return out;
  }

  bool retype(Node* node) {
    bool changed = false;
    for (size_t i = 0; i < node->inputs.size(); ++i) {
      Value* in = node->inputs[i];
      if (in->type.dtype == from_ && exprs_.is_constant(in)) {
        graph_.set_node_input(node, i, lowered_constant(in, node));
        changed = true;
      }
    }
    Attrs attrs;
    for (const auto& [name, value] : node->attrs.items()) {
      const DType* d = std::get_if<DType>(&value);
      attrs.set(name, d != nullptr && *d == from_ ? AttrValue(to_) : value);
    }
    if (!(attrs == node->attrs)) {
      node->attrs = attrs;
      changed = true;
    }
    std::vector<TensorType> in_types;
    for (const Value* v : node->inputs) in_types.push_back(v->type);
    std::vector<TensorType> out_types = infer_types(*node->op, in_types, node->attrs, node->name);
    for (size_t i = 0; i < out_types.size(); ++i) {
      if (node->outputs[i]->type == out_types[i]) continue;
      node->outputs[i]->type = out_types[i];
      changed = true;
    }
    return changed;
  }

  Graph& graph_;
  DType from_, to_;
  WeightExprs exprs_;
  std::unordered_map<const Value*, Value*> lowered_;
};

}  // namespace

bool lower_precision(Graph& graph, DType from, DType to) {
  if (from == to) return false;
  return Lowering(graph, from, to).run();
}

}  // namespace kiln
