// Local simplifications that are provably identities, applied until none
// applies (so the pass is idempotent):
//   - a view with offset 0 whose output type equals its input's (reshape to
//     the same shape, identity permute, ...) is removed;
//   - reshape(reshape(x)) -> reshape(x); permute(permute(x)) -> one permute;
//     a permute that moves only dims of size 1 -> a reshape;
//   - cast to the input's own type, and `contiguous` of a value that already
//     has the output's type, are removed;
//   - cast(cast(x, g), h) -> cast(x, h) when every value of x's dtype is exact
//     in g (then the inner cast changes nothing), which also removes f->g->f
//     round trips through a wider g;
//   - pow(x, 2) and pow(x, 3) with a literal exponent become x*x and (x*x)*x,
//     as torch computes them (not an identity of powf, but torch's own rule);
//   - x*1, 1*x, x/1, x+0, 0+x, x-0 with a literal of ones/zeros, only when
//     the result's type (dtype, dims and strides) equals x's: a literal that
//     would broadcast x to a larger shape keeps the op. Note x+0 turns -0.0
//     into +0.0 in eager; kiln treats that as the same value.
// A removal never makes a graph output an input, weight or literal, nor lists
// one value twice among the outputs (the runtime returns distinct tensors).
#include <numeric>

#include "ir/literal.h"
#include "ops/op_def.h"
#include "ops/view_offset.h"
#include "passes/passes.h"
#include "passes/rewrite.h"
#include "support/error.h"

namespace kiln {

namespace {

// Every value of `from` is exactly representable in `to`.
bool exact_in(DType from, DType to) {
  if (from == to || from == DType::boolean) return true;
  switch (from) {
    case DType::u8:
    case DType::i8:
      return to != DType::boolean && to != (from == DType::u8 ? DType::i8 : DType::u8);
    case DType::i16: return to == DType::i32 || to == DType::i64 || to == DType::f32 || to == DType::f64;
    case DType::i32: return to == DType::i64 || to == DType::f64;
    case DType::f16:
    case DType::bf16: return to == DType::f32 || to == DType::f64;
    case DType::f32: return to == DType::f64;
    default: return false;
  }
}

const Node* producer_op(const Value* v, std::string_view op) {
  return v->producer != nullptr && v->producer->op->name == op ? v->producer : nullptr;
}

// Replaces `node` (one output) by `x`; false when that is not allowed.
bool replace_by(Graph& graph, Node* node, Value* x) {
  Value* out = node->outputs.at(0);
  if (out->type != x->type) return false;
  if (graph.is_graph_output(out) && (x->kind != ValueKind::output || graph.is_graph_output(x))) return false;
  graph.replace_all_uses(out, x);
  Value* old_input = node->inputs.empty() ? nullptr : node->inputs[0];
  graph.erase_node(node);
  // Drop producers this left dead, so a second run finds nothing to do.
  if (old_input && old_input->producer && old_input->users.empty() && !graph.is_graph_output(old_input) &&
      old_input->producer->outputs.size() == 1)
    graph.erase_node(old_input->producer);
  return true;
}

// Points `node` at `input` with `attrs` when that leaves its output types
// unchanged; cleans up the old producer when it becomes dead.
bool retarget(Graph& graph, Node* node, Value* input, Attrs attrs) {
  std::vector<TensorType> types;
  try {
    Attrs full = complete_attrs(*node->op, attrs);
    TensorType in = input->type;
    types = infer_types(*node->op, std::span<const TensorType>(&in, 1), full, node->name);
    attrs = std::move(full);
  } catch (const Error&) {
    return false;
  }
  for (size_t i = 0; i < types.size(); ++i)
    if (types[i] != node->outputs[i]->type) return false;
  Value* old = node->inputs[0];
  graph.set_node_input(node, 0, input);
  node->attrs = std::move(attrs);
  if (old->producer && old->users.empty() && !graph.is_graph_output(old) && old->producer->outputs.size() == 1)
    graph.erase_node(old->producer);
  return true;
}

// A permute that moves only dims of size 1 (the others keep their order) is a reshape, whose strides
// differ only on those dims. Only when no view reads it: a view's type would follow the strides.
bool permute_as_reshape(Graph& graph, Node* node) {
  Value* x = node->inputs.at(0);
  Value* out = node->outputs.at(0);
  if (graph.is_graph_output(out)) return false;
  for (const Node* u : out->users)
    if (u->op->has(kView)) return false;
  std::vector<int64_t> perm = node->attrs.get_ints("dims");
  const int64_t rank = static_cast<int64_t>(perm.size());
  int64_t last = -1;
  for (int64_t& p : perm) {
    if (p < 0) p += rank;
    if (p < 0 || p >= rank || x->type.dims[static_cast<size_t>(p)] == 1) continue;
    if (p < last) return false;
    last = p;
  }
  try {
    (void)view_layout("reshape", x->type, reshape_attrs(out->type.dims));
  } catch (const Error&) {
    return false;
  }
  Value* r = graph.add_node(get_op("reshape"), {x}, reshape_attrs(out->type.dims), "", node)->outputs[0];
  const std::string name = out->name;
  graph.replace_all_uses(out, r);
  graph.erase_node(node);
  graph.rename(r, name);
  return true;
}

bool simplify_view(Graph& graph, Node* node) {
  const std::string& op = node->op->name;
  Value* x = node->inputs.at(0);
  if (view_offset(*node) == 0 && replace_by(graph, node, x)) return true;
  if (op == "reshape") {
    if (const Node* inner = producer_op(x, "reshape")) return retarget(graph, node, inner->inputs[0], node->attrs);
  } else if (op == "permute") {
    if (const Node* inner = producer_op(x, "permute")) {
      const std::vector<int64_t>& outer_dims = node->attrs.get_ints("dims");
      const std::vector<int64_t>& inner_dims = inner->attrs.get_ints("dims");
      std::vector<int64_t> composed;
      for (int64_t d : outer_dims) {
        int64_t rank = static_cast<int64_t>(inner_dims.size());
        int64_t k = d < 0 ? d + rank : d;
        if (k < 0 || k >= rank) return false;
        int64_t src = inner_dims[static_cast<size_t>(k)];
        composed.push_back(src < 0 ? src + rank : src);
      }
      Attrs attrs;
      attrs.set("dims", composed);
      std::vector<int64_t> identity(composed.size());
      std::iota(identity.begin(), identity.end(), 0);
      if (composed == identity && inner->inputs[0]->type == node->outputs[0]->type &&
          replace_by(graph, node, inner->inputs[0]))
        return true;
      return retarget(graph, node, inner->inputs[0], std::move(attrs));
    }
    return permute_as_reshape(graph, node);
  }
  return false;
}

bool simplify_cast(Graph& graph, Node* node) {
  Value* x = node->inputs.at(0);
  if (replace_by(graph, node, x)) return true;
  if (const Node* inner = producer_op(x, "cast")) {
    Value* source = inner->inputs[0];
    if (exact_in(source->type.dtype, x->type.dtype)) return retarget(graph, node, source, node->attrs);
  }
  return false;
}

bool simplify_arith(Graph& graph, Node* node) {
  const std::string& op = node->op->name;
  Value* a = node->inputs.at(0);
  Value* b = node->inputs.at(1);
  double neutral = (op == "add" || op == "sub") ? 0.0 : 1.0;
  bool either_side = op == "add" || op == "mul";
  if (literal_all_equal(b, neutral) && replace_by(graph, node, a)) return true;
  if (either_side && literal_all_equal(a, neutral) && replace_by(graph, node, b)) return true;
  return false;
}

// pow(x, 2) -> x * x and pow(x, 3) -> (x * x) * x, with a literal exponent that does not broadcast
// x: the products torch itself computes for these exponents (a general pow is ~40 instructions a
// value on a GPU, which made GPT-2's tanh GELU compute-bound).
bool simplify_pow(Graph& graph, Node* node) {
  Value* x = node->inputs.at(0);
  Value* e = node->inputs.at(1);
  Value* out = node->outputs.at(0);
  const int power = literal_all_equal(e, 2.0) ? 2 : literal_all_equal(e, 3.0) ? 3 : 0;
  if (power == 0 || out->type.dims != x->type.dims || out->type.dtype != x->type.dtype) return false;
  if (graph.is_graph_output(out)) return false;  // replace_by keeps graph outputs where they are
  const OpDef& mul = get_op("mul");
  Value* y = graph.add_node(mul, {x, x}, {}, "", node)->outputs[0];
  if (power == 3) y = graph.add_node(mul, {y, x}, {}, "", node)->outputs[0];
  graph.replace_all_uses(out, y);
  graph.erase_node(node);
  return true;
}

bool simplify_node(Graph& graph, Node* node) {
  const std::string& op = node->op->name;
  if (node->op->has(kView) && node->inputs.size() == 1 && node->outputs.size() == 1) return simplify_view(graph, node);
  if (op == "cast") return simplify_cast(graph, node);
  if (op == "contiguous") return replace_by(graph, node, node->inputs.at(0));
  if ((op == "add" || op == "sub" || op == "mul" || op == "div") && node->inputs.size() == 2)
    return simplify_arith(graph, node);
  if (op == "pow" && node->inputs.size() == 2) return simplify_pow(graph, node);
  return false;
}

}  // namespace

bool simplify(Graph& graph) {
  bool changed = false;
  for (int round = 0; round < 64; ++round) {
    bool any = false;
    // A rewrite erases only the node itself and producers before it, which
    // this sweep has already passed, so the snapshot stays valid ahead.
    for (Node* node : graph.nodes())
      if (simplify_node(graph, node)) any = true;
    if (!any) break;
    changed = true;
  }
  return changed;
}

}  // namespace kiln
