// Batch norm into the preceding convolution (inference): conv2d(x, W, b)
// followed by batch_norm(., mean, var, gamma, beta, eps) becomes
//   conv2d(x, W * s[:,None,None,None], (b - mean) * s + beta),  s = gamma * rsqrt(var + eps)
// when W, b and every batch-norm parameter are constants and the convolution
// feeds nothing but the batch norm. The new weight and bias are weight-only
// expressions; split_weight_folds then turns each into one folded constant, so
// the call runs one convolution and no normalization. Not in the default
// pipeline: it only pays when those expressions are folded (fold="auto").
#include "ops/op_def.h"
#include "passes/passes.h"
#include "passes/rewrite.h"
#include "passes/weight_exprs.h"

namespace kiln {

namespace {

struct Match {
  Node* conv;
  Node* bn;
};

bool all_constant(const WeightExprs& exprs, const Node& node, size_t first) {
  for (size_t i = first; i < node.inputs.size(); ++i)
    if (!exprs.is_constant(node.inputs[i])) return false;
  return true;
}

bool matches(const Graph& graph, const WeightExprs& exprs, const Node& bn) {
  if (bn.op->name != "batch_norm") return false;
  const Value* y = bn.inputs[0];
  const Node* conv = y->producer;
  if (conv == nullptr || conv->op->name != "conv2d") return false;
  if (y->users.size() != 1 || graph.is_graph_output(y)) return false;
  if (!all_constant(exprs, *conv, 1) || !all_constant(exprs, bn, 1)) return false;
  for (const Value* v : conv->inputs)
    if (v->type.dtype != y->type.dtype) return false;
  for (const Value* v : bn.inputs)
    if (v->type.dtype != y->type.dtype) return false;
  return true;
}

void rewrite(Graph& graph, Node* conv, Node* bn) {
  const DType dtype = bn->outputs[0]->type.dtype;
  auto add = [&](std::string_view op, std::vector<Value*> ins, Attrs attrs = {}) {
    return graph.add_node(get_op(op), std::move(ins), std::move(attrs), "", bn)->outputs[0];
  };
  Value* mean = bn->inputs[1];
  Value* var = bn->inputs[2];
  Value* gamma = bn->inputs.size() > 3 ? bn->inputs[3] : nullptr;
  Value* beta = bn->inputs.size() > 4 ? bn->inputs[4] : nullptr;
  Value* weight = conv->inputs[1];
  Value* bias = conv->inputs.size() > 2 ? conv->inputs[2] : nullptr;
  const int64_t channels = weight->type.dims.at(0);

  Value* scale = add("rsqrt", {add("add", {var, graph.add_scalar(bn->attrs.get_float("eps"), dtype)})});
  if (gamma != nullptr) scale = add("mul", {gamma, scale});
  Attrs shape;
  Dims dims(weight->type.rank(), 1);
  dims[0] = channels;
  shape.set("shape", dims);
  Value* new_weight = add("mul", {weight, add("reshape", {scale}, shape)});
  Value* shift = bias != nullptr ? add("sub", {bias, mean}) : add("neg", {mean});
  Value* new_bias = add("mul", {shift, scale});
  if (beta != nullptr) new_bias = add("add", {new_bias, beta});

  Node* fused = graph.add_node(*conv->op, {conv->inputs[0], new_weight, new_bias}, conv->attrs, "", bn);
  const std::string node_name = bn->name;
  replace_output(graph, bn, fused->outputs[0], {conv});
  fused->name = node_name;  // the batch norm's node is gone, so its name is free
}

}  // namespace

bool fold_batch_norm(Graph& graph) {
  bool changed = false;
  WeightExprs exprs = find_weight_exprs(graph);
  for (Node* node : graph.nodes()) {
    if (!matches(graph, exprs, *node)) continue;
    rewrite(graph, node->inputs[0]->producer, node);
    changed = true;
  }
  return changed;
}

}  // namespace kiln
