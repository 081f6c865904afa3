// fused_compute_type: see fused_compute.h.
#include "ops/fused_compute.h"

namespace kiln {

std::optional<FusedCompute> fused_compute_type(const Node& node, std::string* reason) {
  if (node.body == nullptr) {
    *reason = "fused node without a body";
    return std::nullopt;
  }
  if (node.outputs.empty() || node.body->inputs().size() != node.inputs.size() ||
      node.body->outputs().size() != node.outputs.size()) {
    *reason = "fused node's inputs or outputs do not match its body";
    return std::nullopt;
  }
  for (const Value* v : node.outputs)
    if (v->type.dims != node.outputs[0]->type.dims) {
      *reason = "fused node's outputs have different dims";
      return std::nullopt;
    }
  const Graph& body = *node.body;
  bool f64 = false, floating = false, integer = false;
  auto note = [&](DType d) {
    f64 = f64 || d == DType::f64;
    floating = floating || is_floating(d);
    integer = integer || is_integral(d);
  };
  for (const Value* v : body.inputs()) note(v->type.dtype);
  for (const Value* v : body.literals()) note(v->type.dtype);
  for (const Node* n : body.nodes()) note(n->outputs.at(0)->type.dtype);
  if (floating && integer) {
    *reason = "fused body mixes integer and floating dtypes";
    return std::nullopt;
  }
  return f64 ? FusedCompute::f64 : floating ? FusedCompute::f32 : FusedCompute::i64;
}

}  // namespace kiln
