// patchify_convs: a convolution whose stride equals its kernel (no padding,
// no dilation, one group, the image an exact number of patches) reads every
// input element once, in non-overlapping patches: it is a matrix product of
// the patches and the flattened weight. ViT's and Swin's patch embeddings and
// ConvNeXt's stem are such convolutions, with 3 input channels, where cuDNN's
// tensor-core engines do poorly (ViT-B/16's took 284 us at batch 32 on the
// H200). The rewrite, for x : [N, C, H, W] and w : [O, C, kh, kw]:
//   p = contiguous(permute(reshape(x, [N, C, Ho, kh, Wo, kw]), [0, 2, 4, 1, 3, 5]))
//   y = matmul(reshape(p, [N*Ho*Wo, C*kh*kw]), permute(reshape(w, [O, C*kh*kw]), [1, 0]))
//   (+ bias, which fuse_epilogues then takes into the product)
//   out = permute(reshape(y, [N, Ho, Wo, O]), [0, 3, 1, 2])
// out is [N, O, Ho, Wo] laid out channels-last, and the views downstream of
// it take their new strides; a `contiguous` follows instead when one of them
// could not view it (a reshape its strides do not allow) or it is a graph
// output. The weight stays a view (the product reads it transposed).
// 1x1 convolutions are left alone.
// Runs in the pipeline, and in the fold stage before choose_layout, which
// would otherwise take the convolution into a channels-last chain.
#include "ops/op_def.h"
#include "ops/view_offset.h"
#include "passes/passes.h"
#include "passes/rewrite.h"

namespace kiln {

namespace {

bool float_type(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16 || d == DType::f64; }

bool is_patch_conv(const Node& n) {
  if (n.op->name != "conv2d" || n.inputs[0]->type.rank() != 4 || n.inputs[1]->type.rank() != 4) return false;
  const TensorType& x = n.inputs[0]->type;
  const TensorType& w = n.inputs[1]->type;
  if (!float_type(x.dtype) || x.numel() == 0) return false;
  const Attrs& attrs = n.attrs;
  const std::vector<int64_t>& stride = attrs.get_ints("stride");
  const std::vector<int64_t>& padding = attrs.get_ints("padding");
  const std::vector<int64_t>& dilation = attrs.get_ints("dilation");
  if (attrs.get_int("groups") != 1) return false;
  for (size_t i = 0; i < 2; ++i) {
    const int64_t kernel = w.dims[2 + i];
    if (stride[i] != kernel || padding[i] != 0 || dilation[i] != 1 || x.dims[2 + i] % kernel != 0) return false;
  }
  return w.dims[2] * w.dims[3] > 1;  // 1x1 convolutions stay: cuDNN runs them well inside channels-last chains
}

// The types the views downstream of `v` take when `v` has type `t` (appended to `types`); false when
// one of them could no longer view its input (a reshape its strides do not allow). Other users are
// kernels, which read any strides.
bool view_types_over(const Value* v, const TensorType& t, std::vector<std::pair<Value*, TensorType>>* types) {
  for (Node* user : v->users) {
    if (!user->op->has(kView)) continue;
    Dims strides;
    if (user->op->name == "reshape" && !reshape_strides(t.dims, t.strides, user->outputs[0]->type.dims, &strides))
      return false;
    TensorType viewed = view_layout(user->op->name, t, user->attrs).type;
    types->emplace_back(user->outputs[0], viewed);
    if (!view_types_over(user->outputs[0], viewed, types)) return false;
  }
  return true;
}

void rewrite(Graph& graph, Node* conv) {
  Value* x = conv->inputs[0];
  Value* w = conv->inputs[1];
  const int64_t n = x->type.dims[0], c = x->type.dims[1];
  const int64_t o = w->type.dims[0], kh = w->type.dims[2], kw = w->type.dims[3];
  const int64_t ho = x->type.dims[2] / kh, wo = x->type.dims[3] / kw;
  auto add = [&](const char* op, std::vector<Value*> inputs, Attrs attrs = {}) {
    return graph.add_node(get_op(op), std::move(inputs), std::move(attrs), "", conv)->outputs[0];
  };
  Value* patches = add("reshape", {x}, reshape_attrs({n, c, ho, kh, wo, kw}));
  patches = add("contiguous", {add("permute", {patches}, permute_attrs({0, 2, 4, 1, 3, 5}))});
  patches = add("reshape", {patches}, reshape_attrs({n * ho * wo, c * kh * kw}));
  Value* weight = add("permute", {add("reshape", {w}, reshape_attrs({o, c * kh * kw}))}, permute_attrs({1, 0}));
  Value* y = add("matmul", {patches, weight});
  if (conv->inputs.size() > 2 && conv->inputs[2] != nullptr) y = add("add", {y, conv->inputs[2]});
  Value* out = add("permute", {add("reshape", {y}, reshape_attrs({n, ho, wo, o}))}, permute_attrs({0, 3, 1, 2}));
  Value* old = conv->outputs[0];
  std::vector<std::pair<Value*, TensorType>> view_types;
  if (graph.is_graph_output(old) || !view_types_over(old, out->type, &view_types)) {
    out = add("contiguous", {out});  // NCHW again: the views downstream keep their types
  } else {
    for (auto& [value, type] : view_types) value->type = type;
  }
  const std::string node_name = conv->name;
  replace_output(graph, conv, out);
  out->producer->name = node_name;
}

}  // namespace

bool patchify_convs(Graph& graph) {
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (!is_patch_conv(*node)) continue;
    rewrite(graph, node);
    changed = true;
  }
  return changed;
}

}  // namespace kiln
