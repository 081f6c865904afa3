// fuse_epilogues: folds what follows a matrix product or a convolution into
// the op itself, so the CUDA backend runs one library call (cuBLASLt
// epilogues, a fused cuDNN graph) instead of a product and an elementwise pass:
//   add(matmul(a, b), bias)          -> matmul_epilogue(a, b, bias) {activation="none"}
//   add(reshape(matmul(a, b)), bias) -> reshape(matmul_epilogue(a, b, bias)) when the
//                                       reshape keeps the last dim (a linear layer on a 3-D
//                                       input, flattened to 2-D for the product)
//   add(E, r), add(reshape(E), r)    -> matmul_epilogue(a, b, bias, r'), reshaped as above,
//     E = matmul_epilogue(a, b, bias) {activation="none"} (a transformer block's skip
//     connection: cuBLASLt adds r as its C matrix); r has the add's dims and dtype (no
//     broadcast), and r' is r, or r viewed at E's dims (a reshape; left unfused when r's
//     strides do not allow that view). Tried after the bias, so the bias goes in first.
//   relu|gelu|gelu_tanh(matmul...)   -> matmul_epilogue(...) {activation=<op>}
//   relu|gelu_tanh(reshape(matmul...)) -> reshape(matmul_epilogue(...) {activation=<op>}) when the
//                                       reshape keeps the last dim (an MLP on a 3-D input; not exact
//                                       gelu, which cuBLASLt's epilogue does not apply)
//   add(C, r)                        -> conv2d_fused(x, w, bias, r), C = conv2d or conv2d_fused
//     {relu=false} with a bias (a ResNet block's skip connection after batch norm was folded
//     into the convolution; cuDNN adds r in the convolution's graph); r has the add's dims,
//     dtype and strides (no broadcast, the convolution's own layout)
//   relu(conv2d(...) | conv2d_fused) -> conv2d_fused(...) {relu=true}, after the residual if any
// bias is 1-D over the product's last dim (a linear layer's bias); a or b of
// rank 1 is left alone. Nothing fuses after a residual. The product must feed
// only the fused op and not be a graph output, and everything is f32, f16 or
// bf16. The CPU kernels of the fused ops round like the unfused graph
// (epilogue_kernels.cpp), so CPU results do not change. Runs before
// fuse_elementwise, which would otherwise take the adds and the activation
// into an elementwise group.
#include "ops/op_def.h"
#include "ops/view_offset.h"
#include "passes/passes.h"
#include "passes/rewrite.h"

namespace kiln {

namespace {

bool float_type(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16; }

// The producer of `v` when `v` feeds only one node and is not a graph output.
Node* sole_producer(const Graph& graph, const Value* v) {
  if (v->producer == nullptr || v->users.size() != 1 || graph.is_graph_output(v)) return nullptr;
  return v->producer;
}

bool plain_product(const Node* p) {
  if (p == nullptr || (p->op->name != "matmul" && p->op->name != "matmul_epilogue")) return false;
  if (!float_type(p->outputs[0]->type.dtype)) return false;
  if (p->inputs[0]->type.rank() < 2 || p->inputs[1]->type.rank() < 2) return false;
  // A residual stays the last addition: nothing more fuses into such a product.
  return p->op->name == "matmul" || (p->attrs.get_string("activation") == "none" && p->inputs.size() <= 3);
}

// The producer of `x`, or the producer of the reshape that `x` is when that reshape keeps the
// last dim (*reshape set), each feeding only the next; nullptr otherwise.
Node* producer_through_reshape(const Graph& graph, const Value* x, Node** reshape) {
  *reshape = nullptr;
  Node* p = sole_producer(graph, x);
  if (p == nullptr || p->op->name != "reshape") return p;
  *reshape = p;
  p = sole_producer(graph, p->inputs[0]);
  const bool keeps_last = p != nullptr && !x->type.dims.empty() && !p->outputs[0]->type.dims.empty() &&
                          x->type.dims.back() == p->outputs[0]->type.dims.back();
  return keeps_last ? p : nullptr;
}

// Replaces `tail` (and the product it consumes) by one node of `op`.
void replace(Graph& graph, Node* product, Node* tail, const OpDef& op, std::vector<Value*> inputs, Attrs attrs) {
  Node* fused = graph.add_node(op, std::move(inputs), std::move(attrs), "", tail);
  const std::string node_name = tail->name;
  replace_output(graph, tail, fused->outputs[0], {product});
  fused->name = node_name;
}

// The bias of `add` when it is 1-D over `product`'s last dim and the add does not broadcast
// `through` (the product's output, or a reshape of it) to a larger shape.
bool bias_over_last_dim(const Node* add, const Value* bias, const Node* product, const Value* through) {
  const TensorType& out = product->outputs[0]->type;
  return bias->type.rank() == 1 && bias->type.dims[0] == out.dims.back() && bias->type.dtype == out.dtype &&
         add->outputs[0]->type.dims == through->type.dims;
}

// Replaces `tail` (an add or an activation of product `p`'s output, through `reshape` when not
// null) by matmul_epilogue(inputs) {activation}, followed by the same reshape.
void replace_tail(Graph& graph, Node* p, Node* reshape, Node* tail, std::vector<Value*> inputs,
                  const std::string& activation) {
  Attrs attrs;
  attrs.set("activation", activation);
  if (reshape == nullptr) {
    replace(graph, p, tail, get_op("matmul_epilogue"), std::move(inputs), attrs);
    return;
  }
  // The epilogue where the product was, then the same reshape of its output in place of the tail.
  Node* fused = graph.add_node(get_op("matmul_epilogue"), std::move(inputs), attrs, "", tail);
  Node* view = graph.add_node(get_op("reshape"), {fused->outputs[0]}, reshape->attrs, "", tail);
  const std::string tail_name = tail->name, product_name = p->name;
  replace_output(graph, tail, view->outputs[0], {reshape, p});
  view->name = tail_name;
  fused->name = product_name;
}

void replace_add(Graph& graph, Node* p, Node* reshape, Node* add, std::vector<Value*> inputs) {
  replace_tail(graph, p, reshape, add, std::move(inputs), "none");
}

bool fuse_bias(Graph& graph, Node* add) {
  for (size_t i = 0; i < 2; ++i) {
    Value* bias = add->inputs[1 - i];
    Node* reshape = nullptr;
    Node* p = producer_through_reshape(graph, add->inputs[i], &reshape);
    if (!plain_product(p) || p->inputs.size() > 2 || !bias_over_last_dim(add, bias, p, add->inputs[i])) continue;
    replace_add(graph, p, reshape, add, {p->inputs[0], p->inputs[1], bias});
    return true;
  }
  return false;
}

// The add of a residual to a matmul_epilogue that has its bias (after fuse_bias).
bool fuse_residual(Graph& graph, Node* add) {
  const TensorType& out = add->outputs[0]->type;
  for (size_t i = 0; i < 2; ++i) {
    Value* r = add->inputs[1 - i];
    Node* reshape = nullptr;
    Node* p = producer_through_reshape(graph, add->inputs[i], &reshape);
    if (!plain_product(p) || p->inputs.size() != 3 || add->inputs[i]->type.dims != out.dims) continue;
    if (r->type.dims != out.dims || r->type.dtype != out.dtype || r->type.dtype != p->outputs[0]->type.dtype) continue;
    if (reshape != nullptr) {  // r viewed at the product's dims, when its strides allow it
      const Dims& dims = p->outputs[0]->type.dims;
      Dims strides;
      if (!reshape_strides(r->type.dims, r->type.strides, dims, &strides)) continue;
      r = graph.add_node(get_op("reshape"), {r}, reshape_attrs(std::vector<int64_t>(dims.begin(), dims.end())), "",
                         add)->outputs[0];
    }
    replace_add(graph, p, reshape, add, {p->inputs[0], p->inputs[1], p->inputs[2], r});
    return true;
  }
  return false;
}

// The add of a residual to a convolution that has its bias and no ReLU yet.
bool fuse_conv_residual(Graph& graph, Node* add) {
  const TensorType& out = add->outputs[0]->type;
  for (size_t i = 0; i < 2; ++i) {
    Node* p = sole_producer(graph, add->inputs[i]);
    if (p == nullptr || (p->op->name != "conv2d" && p->op->name != "conv2d_fused") || p->inputs.size() != 3) continue;
    if ((p->op->name == "conv2d_fused" && p->attrs.get_bool("relu")) || !float_type(out.dtype)) continue;
    const Value* r = add->inputs[1 - i];
    if (add->inputs[i]->type.dims != out.dims || r->type.dims != out.dims || r->type.dtype != out.dtype ||
        p->outputs[0]->type.dtype != out.dtype || r->type.strides != p->outputs[0]->type.strides)
      continue;
    Attrs attrs = p->attrs;
    if (!attrs.has("relu")) attrs.set("relu", false);
    if (!attrs.has("channels_last")) attrs.set("channels_last", false);
    replace(graph, p, add, get_op("conv2d_fused"), {p->inputs[0], p->inputs[1], p->inputs[2], add->inputs[1 - i]},
            attrs);
    return true;
  }
  return false;
}

bool fuse_activation(Graph& graph, Node* act) {
  Node* reshape = nullptr;
  Node* p = producer_through_reshape(graph, act->inputs[0], &reshape);
  if (p == nullptr || p->outputs[0]->type.dtype != act->outputs[0]->type.dtype) return false;
  // Through a reshape, only the activations cuBLASLt applies in its epilogue (exact GELU would move from
  // an elementwise kernel into the epilogue's separate bias-and-activation kernel, a loss on CUDA).
  if (plain_product(p) && (reshape == nullptr || act->op->name != "gelu")) {
    replace_tail(graph, p, reshape, act, p->inputs, act->op->name);
    return true;
  }
  if (reshape != nullptr) return false;
  const bool conv = p->op->name == "conv2d" || (p->op->name == "conv2d_fused" && !p->attrs.get_bool("relu"));
  if (act->op->name != "relu" || !conv || !float_type(p->outputs[0]->type.dtype)) return false;
  Attrs attrs = p->attrs;
  attrs.set("relu", true);
  if (!attrs.has("channels_last")) attrs.set("channels_last", false);
  replace(graph, p, act, get_op("conv2d_fused"), p->inputs, attrs);
  return true;
}

bool fuse_one(Graph& graph) {
  for (Node* node : graph.nodes()) {
    const std::string& op = node->op->name;
    if (op == "add" && (fuse_bias(graph, node) || fuse_residual(graph, node) || fuse_conv_residual(graph, node)))
      return true;
    if ((op == "relu" || op == "gelu" || op == "gelu_tanh") && fuse_activation(graph, node)) return true;
  }
  return false;
}

}  // namespace

bool fuse_epilogues(Graph& graph) {
  bool changed = false;
  while (fuse_one(graph)) changed = true;
  return changed;
}

}  // namespace kiln
