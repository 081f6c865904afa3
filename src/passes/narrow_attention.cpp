// narrow_attention: attention computed in f32 on f16/bf16 values widened for
// it, whose result is narrowed back, runs in the narrow dtype instead.
//
// torch's math path for scaled_dot_product_attention widens f16/bf16 q, k and
// v to f32 (torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp is off by
// default), so fuse_attention finds an f32 attention between casts. kiln's
// f16/bf16 attention kernels accumulate in f32, as torch's fused CUDA kernels
// do, read half the bytes and use tensor cores; the f32 kernels do neither.
//
// The match: attention(cast(q), cast(k), cast(v) [, mask]) : f32, with q, k, v
// of one dtype N (f16 or bf16); its result read only through reshapes ending in
// one cast to N; the mask absent, bool, or cast(m) with m of dtype N, so that
// no mask value changes. Anything else is left as it is.
#include <optional>
#include <vector>

#include "ops/op_def.h"
#include "passes/passes.h"

namespace kiln {

namespace {

// The value `v` was widened from, when `v` is a cast to f32 of an f16/bf16 value.
Value* widened_from(Value* v) {
  Node* c = v->producer;
  if (c == nullptr || c->op->name != "cast" || v->type.dtype != DType::f32) return nullptr;
  Value* src = c->inputs[0];
  return is_half(src->type.dtype) ? src : nullptr;
}

// The reshapes from the attention's result to its one narrowing cast, and that cast.
struct Narrowing {
  std::vector<Node*> reshapes;
  Node* cast = nullptr;
};

std::optional<Narrowing> narrowing_of(Value* out, DType narrow, const Graph& g) {
  Narrowing n;
  for (Value* v = out;;) {
    if (v->users.size() != 1 || g.is_graph_output(v)) return std::nullopt;
    Node* u = v->users[0];
    if (u->op->name == "reshape") {
      n.reshapes.push_back(u);
      v = u->outputs[0];
      continue;
    }
    if (u->op->name != "cast" || u->outputs[0]->type.dtype != narrow) return std::nullopt;
    n.cast = u;
    return n;
  }
}

bool narrow_at(Graph& g, Node* att) {
  if (att->outputs[0]->type.dtype != DType::f32 || att->inputs.size() < 3) return false;
  std::vector<Value*> ins;
  for (size_t i = 0; i < 3; ++i) ins.push_back(widened_from(att->inputs[i]));
  if (ins[0] == nullptr || ins[1] == nullptr || ins[2] == nullptr) return false;
  const DType narrow = ins[0]->type.dtype;
  if (ins[1]->type.dtype != narrow || ins[2]->type.dtype != narrow) return false;
  if (att->inputs.size() > 3) {
    Value* mask = att->inputs[3];
    if (mask->type.dtype == DType::boolean) {
      ins.push_back(mask);
    } else {
      Value* m = widened_from(mask);
      if (m == nullptr || m->type.dtype != narrow) return false;
      ins.push_back(m);
    }
  }
  std::optional<Narrowing> n = narrowing_of(att->outputs[0], narrow, g);
  if (!n) return false;

  Value* out = g.add_node(*att->op, ins, att->attrs, "", att)->outputs[0];
  for (Node* r : n->reshapes) out = g.add_node(*r->op, {out}, r->attrs, "", r)->outputs[0];
  g.replace_all_uses(n->cast->outputs[0], out);
  return true;
}

}  // namespace

bool narrow_attention(Graph& graph) {
  bool changed = false;
  for (Node* n : graph.nodes())
    if (n->op->name == "attention" && !n->outputs[0]->users.empty()) changed |= narrow_at(graph, n);
  if (changed) dce(graph);  // the f32 attention, its casts and reshapes
  return changed;
}

}  // namespace kiln
