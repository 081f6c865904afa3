// recognize_gelu: the tanh approximation of GELU written out op by op, as
// transformers' NewGELUActivation ("gelu_new": GPT-2, GPT-J, CodeGen and
// others) writes it,
//   0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
// becomes one gelu_tanh(x). fuse_epilogues then folds it into the matrix
// product before it (cuBLASLt's GELU epilogue is this approximation), so the
// MLP's widest activation is not read and written again by an elementwise
// kernel of nine ops.
//
// Matched up to the order of each mul's and add's operands, with x^3 as
// pow(x, 3) or (x*x)*x (simplify's form of it). The constants must equal the
// canonical ones rounded to the literal's dtype; in f16/bf16 graphs the two
// inexact ones are products computed in f32 (Note [Scalars in f16 and bf16],
// builder/graph_builder.cpp). Every intermediate must be used only inside
// the pattern.
//
// Numerics: gelu_tanh computes in f32 with the exact constants and rounds
// once, where the op-by-op graph (and torch) rounds after every op. The two
// differ by a few units in the last place of the dtype, as torch's own
// F.gelu(approximate="tanh") differs from the formula.
#include <vector>

#include "ir/literal.h"
#include "ops/op_def.h"
#include "passes/passes.h"
#include "passes/rewrite.h"

namespace kiln {

namespace {

constexpr double kSqrtTwoOverPi = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kCubic = 0.044715;

// `v` is a floating literal whose every element is `expected` rounded to v's dtype.
bool literal_is(const Value* v, double expected) {
  if (v->kind != ValueKind::literal || !is_floating(v->type.dtype) || v->literal_data.empty()) return false;
  return literal_all_equal(v, round_to(v->type.dtype, expected));
}

// The node of op `op` producing `v` when `v` is used once (inside the pattern) and is not a graph output.
Node* inner(const Graph& g, const Value* v, std::string_view op) {
  Node* p = producer_of(v, op);
  return p != nullptr && single_use(v, g) ? p : nullptr;
}

// For a binary node: the operand that is not the literal `constant`, when the other one is.
Value* other_than_literal(const Node* n, double constant) {
  if (literal_is(n->inputs[1], constant)) return n->inputs[0];
  if (literal_is(n->inputs[0], constant)) return n->inputs[1];
  return nullptr;
}

// y when `v` is y * constant, single-use inside the pattern: a mul in v's dtype, or the builder's f32 form
// of it (Note [Scalars in f16 and bf16]), which f16 and bf16 graphs hold for 0.044715 and sqrt(2/pi).
Value* times_constant(const Graph& g, const Value* v, double constant) {
  if (Node* m = inner(g, v, "mul")) return other_than_literal(m, constant);
  const WidenedScalarOp w = widened_scalar_op(v);
  if (w.op == nullptr || w.op->op->name != "mul" || !single_use(v, g) || !single_use(w.op->outputs[0], g))
    return nullptr;
  const Value* widened = other_than_literal(w.op, constant);
  return widened != nullptr && single_use(widened, g) ? w.x : nullptr;
}

// v is x^3: pow(x, 3), or (x*x)*x in either order of the outer product.
bool is_cube_of(const Graph& g, const Value* v, const Value* x) {
  if (Node* p = inner(g, v, "pow")) return p->inputs[0] == x && literal_is(p->inputs[1], 3.0);
  Node* m = inner(g, v, "mul");
  if (m == nullptr) return false;
  for (int i = 0; i < 2; ++i) {
    Node* sq = inner(g, m->inputs[i], "mul");
    if (m->inputs[1 - i] == x && sq != nullptr && sq->inputs[0] == x && sq->inputs[1] == x) return true;
  }
  return false;
}

// `tanh_arg` is sqrt(2/pi) * (x + 0.044715 * x^3).
bool is_gelu_tanh_argument(const Graph& g, const Value* tanh_arg, const Value* x) {
  Value* sum = times_constant(g, tanh_arg, kSqrtTwoOverPi);
  Node* add = sum != nullptr ? inner(g, sum, "add") : nullptr;
  if (add == nullptr) return false;
  for (int i = 0; i < 2; ++i) {
    if (add->inputs[i] != x) continue;
    Value* cube = times_constant(g, add->inputs[1 - i], kCubic);
    if (cube != nullptr && is_cube_of(g, cube, x)) return true;
  }
  return false;
}

// x when `root` is 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), else null.
Value* gelu_tanh_input(const Graph& g, const Node* root) {
  for (int i = 0; i < 2; ++i) {
    Node* half = inner(g, root->inputs[i], "mul");
    Node* one_plus = inner(g, root->inputs[1 - i], "add");
    Value* x = half != nullptr ? other_than_literal(half, 0.5) : nullptr;
    Value* t = one_plus != nullptr ? other_than_literal(one_plus, 1.0) : nullptr;
    Node* tanh = t != nullptr ? inner(g, t, "tanh") : nullptr;
    if (x != nullptr && tanh != nullptr && is_gelu_tanh_argument(g, tanh->inputs[0], x)) return x;
  }
  return nullptr;
}

bool recognize_at(Graph& graph, Node* root) {
  if (root->inputs.size() != 2 || !is_floating(root->outputs[0]->type.dtype)) return false;
  Value* x = gelu_tanh_input(graph, root);
  if (x == nullptr || x->type.dtype != root->outputs[0]->type.dtype || x->type.dims != root->outputs[0]->type.dims)
    return false;
  Node* gelu = graph.add_node(get_op("gelu_tanh"), {x}, {}, "", root);
  if (gelu->outputs[0]->type != root->outputs[0]->type) {  // another layout than the formula's result
    graph.erase_node(gelu);
    return false;
  }
  const std::string name = root->name;
  replace_output(graph, root, gelu->outputs[0]);
  gelu->name = name;
  dce(graph);  // the formula's other ops
  return true;
}

}  // namespace

bool recognize_gelu(Graph& graph) {
  // A rewrite erases nodes that a list collected before it may hold, so each scan stops at its first match.
  bool changed = false;
  for (bool found = true; found;) {
    found = false;
    for (Node* n : nodes_with_op(graph, "mul"))
      if (recognize_at(graph, n)) {
        found = changed = true;
        break;
      }
  }
  return changed;
}

}  // namespace kiln
