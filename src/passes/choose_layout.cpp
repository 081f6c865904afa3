// choose_layout: runs f16/bf16 convolution chains channels-last (NHWC), the
// layout tensor-core convolutions want, deciding once at compile time.
//
// A chain is every f16/bf16 conv2d (or conv2d_fused) of a 4-D input with a
// constant weight, plus what lies between convolutions: pooling ops, and
// elementwise ops and casts whose 4-D inputs all come from the chain or enter
// it (0-d inputs are fine; broadcasting between two chain values is too,
// since both are NHWC). A value entering the chain is an NCHW input of an
// earlier chain convolution or pool: an op that reads it too (a block's
// identity added to its last convolution) reads the same NHWC conversion. Chain nodes are rebuilt with channels_last=true (convolutions
// become conv2d_fused), so their tensors are N, H, W, C in the IR. Conversions
// appear only at the boundaries: contiguous(permute(x, [0,2,3,1])) where an
// NCHW value enters, contiguous(permute(y, [0,3,1,2])) where a chain value is
// read outside the chain or is a graph output. A weight's re-layout
// contiguous(permute(W, [0,2,3,1])) is a weight-only expression, so
// split_weight_folds turns it into a folded constant: weights are never
// re-laid-out per call. Hence the frontend runs this pass in its fold stage,
// only for CUDA graphs and only when folding is on (python/kiln/folding.py).
// The CPU backend runs the result too (channels_last_kernels.cpp).
#include <unordered_map>
#include <unordered_set>

#include "ops/op_def.h"
#include "passes/passes.h"
#include "passes/rewrite.h"
#include "passes/weight_exprs.h"

namespace kiln {

namespace {

bool is_pool(const Node& n) {
  const std::string& op = n.op->name;
  return op == "max_pool2d" || op == "avg_pool2d" || op == "adaptive_avg_pool2d";
}

bool is_conv(const Node& n) { return n.op->name == "conv2d" || n.op->name == "conv2d_fused"; }

bool channels_last(const Node& n) {
  return n.op->attr_spec("channels_last") != nullptr && n.attrs.get_bool("channels_last");
}

bool conv_candidate(const Node& n, const WeightExprs& exprs) {
  if (!is_conv(n) || channels_last(n)) return false;
  const DType d = n.outputs[0]->type.dtype;
  return is_half(d) && n.inputs[0]->type.rank() == 4 && exprs.is_constant(n.inputs[1]);
}

// `chain_values`: outputs of chain nodes; `entering`: NCHW values a chain node converts to NHWC.
bool joins(const Node& n, const std::unordered_set<const Value*>& chain_values,
           const std::unordered_set<const Value*>& entering) {
  if (is_pool(n)) return !channels_last(n) && chain_values.count(n.inputs[0]) != 0;
  if (!n.op->has(kElementwise) && n.op->name != "cast") return false;
  if (n.outputs[0]->type.rank() != 4) return false;
  bool any_from_chain = false;
  for (const Value* v : n.inputs) {
    if (v->type.rank() == 0 || (v->type.rank() == 4 && entering.count(v) != 0)) continue;
    if (v->type.rank() != 4 || chain_values.count(v) == 0) return false;
    any_from_chain = true;
  }
  return any_from_chain;
}

// contiguous(permute(v, dims)), inserted before `before`.
Value* relayout(Graph& graph, Value* v, std::vector<int64_t> dims, const Node* before) {
  Value* p = graph.add_node(get_op("permute"), {v}, permute_attrs(std::move(dims)), "", before)->outputs[0];
  return graph.add_node(get_op("contiguous"), {p}, {}, "", before)->outputs[0];
}

}  // namespace

bool choose_layout(Graph& graph) {
  const WeightExprs exprs = find_weight_exprs(graph);
  const std::vector<Node*> order = graph.nodes();
  std::unordered_set<const Node*> chain;
  std::unordered_set<const Value*> chain_values, entering;
  for (const Node* n : order) {
    const bool conv = conv_candidate(*n, exprs);
    if (!conv && !joins(*n, chain_values, entering)) continue;
    chain.insert(n);
    for (const Value* v : n->outputs) chain_values.insert(v);
    if (conv && chain_values.count(n->inputs[0]) == 0) entering.insert(n->inputs[0]);
  }
  if (chain.empty()) return false;

  std::unordered_map<const Value*, Value*> nhwc;  // chain value or entering NCHW value -> its NHWC form
  std::vector<Node*> old_nodes;
  for (Node* n : order) {
    if (chain.count(n) == 0) continue;
    std::vector<Value*> inputs;
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      Value* v = n->inputs[i];
      auto it = nhwc.find(v);
      if (it != nhwc.end()) {
        inputs.push_back(it->second);
      } else if ((is_conv(*n) && i < 2) || (is_pool(*n) && i == 0) || entering.count(v) != 0) {  // entering the chain
        Value* converted = relayout(graph, v, {0, 2, 3, 1}, n);
        nhwc[v] = converted;
        inputs.push_back(converted);
      } else {
        inputs.push_back(v);  // a 0-d operand or a conv bias
      }
    }
    Attrs attrs = n->attrs;
    const OpDef* op = n->op;
    if (is_conv(*n)) {
      op = &get_op("conv2d_fused");
      if (!attrs.has("relu")) attrs.set("relu", false);
    }
    if (op->attr_spec("channels_last") != nullptr) attrs.set("channels_last", true);
    Node* rebuilt = graph.add_node(*op, inputs, attrs, "", n);
    for (size_t k = 0; k < n->outputs.size(); ++k) {
      Value* old = n->outputs[k];
      nhwc[old] = rebuilt->outputs[k];
      std::vector<std::pair<Node*, size_t>> outside;
      std::unordered_set<const Node*> seen;
      for (Node* user : old->users)
        if (chain.count(user) == 0 && seen.insert(user).second)
          for (size_t i = 0; i < user->inputs.size(); ++i)
            if (user->inputs[i] == old) outside.emplace_back(user, i);
      if (outside.empty() && !graph.is_graph_output(old)) continue;
      Value* back = relayout(graph, rebuilt->outputs[k], {0, 3, 1, 2}, n);
      for (auto& [user, index] : outside) graph.set_node_input(user, index, back);
      if (graph.is_graph_output(old)) {
        std::vector<Value*> outputs = graph.outputs();
        for (Value*& o : outputs)
          if (o == old) o = back;
        graph.set_outputs(outputs);
      }
    }
    old_nodes.push_back(n);
  }
  for (auto it = old_nodes.rbegin(); it != old_nodes.rend(); ++it) graph.erase_node(*it);
  return true;
}

}  // namespace kiln
