// matmul_row_order: a matrix product whose rows are a permuted copy of a
// contiguous tensor multiplies the tensor's rows where they are; its result
// is read through the same permutation of rows, and the copy goes.
//
// A product acts on each row alone (so do its bias and activation), so the
// order of its rows is free: reshape(contiguous(permute(X, P)), [N, K]) @ W
// holds the rows of reshape(X, [N, K]) @ W in P's order. torchvision's
// multi-head attention moves its input to sequence-first order for the
// packed projection, the merged heads to sequence-first order for the output
// projection, and the output back to batch-first order: three copies per
// layer, which this pass turns into views (simplify then removes the two
// permutes that cancel, and the copy of the now contiguous output).
//
// The match: m = matmul(reshape(contiguous(permute(X, P)), [N, K]), W) with W
// a matrix, X contiguous, K the product of the copy's trailing dims that P
// leaves in place (X's trailing dims, in order), each value used once; m then
// goes through elementwise ops that treat every row alike (other operands
// constant along the rows) to reshapes back to the copy's leading dims, maybe
// followed by more such ops (a bias added after the reshape). Those become the
// same ops on the new product's rows, then a permute of the rows, and the
// views reading them are rebuilt for their new strides (rewrite.h).
#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>
#include <vector>

#include "ops/op_def.h"
#include "ops/view_offset.h"
#include "passes/passes.h"
#include "passes/rewrite.h"

namespace kiln {

namespace {

int64_t product(const Dims& d, size_t from, size_t to) {
  return std::accumulate(d.begin() + static_cast<std::ptrdiff_t>(from), d.begin() + static_cast<std::ptrdiff_t>(to),
                         int64_t{1}, std::multiplies<>());
}

// An elementwise op that treats every row of `through` alike: its other operands hold one row (or less).
bool rowwise(const Node* n, const Value* through) {
  if (!n->op->has(kElementwise) || n->outputs.size() != 1 || n->outputs[0]->type.dims != through->type.dims)
    return false;
  for (const Value* in : n->inputs) {
    if (in == through) continue;
    const Dims& d = in->type.dims;
    for (size_t i = 0; i + 1 < d.size(); ++i)
      if (d[i] != 1) return false;
  }
  return true;
}

// Follows single uses from `v` through row-wise ops; the ops, in order.
std::vector<Node*> rowwise_chain(Value* v, const Graph& g) {
  std::vector<Node*> chain;
  while (single_use(v, g) && rowwise(v->users[0], v)) {
    chain.push_back(v->users[0]);
    v = chain.back()->outputs[0];
  }
  return chain;
}

// A reshape of the product back to the copy's leading dims, and the row-wise ops after it.
struct Back {
  Node* reshape = nullptr;
  std::vector<Node*> chain;
  Value* end() const { return chain.empty() ? reshape->outputs[0] : chain.back()->outputs[0]; }
};

// The matched pieces of one product.
struct Match {
  Value* source = nullptr;            // X
  std::vector<int64_t> lead_perm;     // P on the copy's leading dims
  Dims source_lead;                   // X's leading dims
  std::vector<Back> backs;            // where the product's rows return to the copy's leading dims
};

std::optional<Match> match(Node* mm, const Graph& g) {
  if (mm->inputs.size() != 2 || mm->inputs[1]->type.rank() != 2) return std::nullopt;
  Value* rows = mm->inputs[0];
  if (rows->type.rank() != 2 || !single_use(rows, g)) return std::nullopt;
  Node* reshape = producer_of(rows, "reshape");
  if (reshape == nullptr || !single_use(reshape->inputs[0], g)) return std::nullopt;
  Node* copy = producer_of(reshape->inputs[0], "contiguous");
  if (copy == nullptr || !single_use(copy->inputs[0], g)) return std::nullopt;
  Node* permute = producer_of(copy->inputs[0], "permute");
  if (permute == nullptr) return std::nullopt;
  Value* x = permute->inputs[0];
  if (!x->type.is_contiguous() || x->type.rank() < 2) return std::nullopt;
  const Dims& c = copy->outputs[0]->type.dims;
  const size_t rank = c.size();
  const int64_t k = rows->type.dims[1];
  // t: where the copy's trailing dims (merged into K) begin.
  size_t t = rank;
  while (t > 0 && product(c, t, rank) < k) --t;
  if (t == 0 || t == rank || product(c, t, rank) != k) return std::nullopt;
  std::vector<int64_t> perm = permute->attrs.get_ints("dims");
  for (int64_t& p : perm)
    if (p < 0) p += static_cast<int64_t>(rank);
  for (size_t i = t; i < rank; ++i)
    if (perm[i] != static_cast<int64_t>(i)) return std::nullopt;  // X's trailing dims, in place
  std::vector<int64_t> identity(t);
  std::iota(identity.begin(), identity.end(), 0);
  Match m{x, std::vector<int64_t>(perm.begin(), perm.begin() + static_cast<std::ptrdiff_t>(t)),
          Dims(x->type.dims.begin(), x->type.dims.begin() + static_cast<std::ptrdiff_t>(t)), {}};
  if (m.lead_perm == identity) return std::nullopt;  // rows already in X's order
  // Row-wise ops from the product to the reshapes back to the copy's leading dims, and row-wise ops after.
  Dims back(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(t));
  back.push_back(mm->outputs[0]->type.dims[1]);
  std::vector<Node*> before = rowwise_chain(mm->outputs[0], g);
  Value* v = before.empty() ? mm->outputs[0] : before.back()->outputs[0];
  if (v->users.empty() || g.is_graph_output(v)) return std::nullopt;
  for (Node* u : distinct_users(v)) {
    if (u->op->name != "reshape" || u->outputs[0]->type.dims != back) return std::nullopt;
    m.backs.push_back(Back{u, rowwise_chain(u->outputs[0], g)});
  }
  return m;
}

bool reorder(Graph& g, Node* mm) {
  auto m = match(mm, g);
  if (!m) return false;
  // The new values after each reshape back: the same row-wise ops in X's row order, then a permute of the
  // rows. Checked before anything changes.
  Dims lead_shape = m->source_lead;
  lead_shape.push_back(mm->outputs[0]->type.dims[1]);
  std::vector<int64_t> perm = m->lead_perm;
  perm.push_back(static_cast<int64_t>(perm.size()));
  for (const Back& b : m->backs) {
    TensorType rows(b.end()->type.dtype, lead_shape);
    if (!views_can_follow(b.end(), view_layout("permute", rows, permute_attrs(perm)).type)) return false;
  }

  Value* x_rows = g.add_node(get_op("reshape"), {m->source}, reshape_attrs(mm->inputs[0]->type.dims), "", mm)
                      ->outputs[0];
  g.set_node_input(mm, 0, x_rows);  // same [N, K] type: the product and the row-wise ops after it keep theirs
  for (const Back& b : m->backs) {
    const Node* at = b.chain.empty() ? b.reshape : b.chain.back();
    Value* v = g.add_node(get_op("reshape"), {b.reshape->inputs[0]}, reshape_attrs(lead_shape), "", at)->outputs[0];
    Value* through = b.reshape->outputs[0];
    for (const Node* n : b.chain) {
      std::vector<Value*> ins = n->inputs;
      std::replace(ins.begin(), ins.end(), through, v);
      through = n->outputs[0];
      v = g.add_node(*n->op, ins, n->attrs, "", at)->outputs[0];
    }
    Value* view = g.add_node(get_op("permute"), {v}, permute_attrs(perm), "", at)->outputs[0];
    replace_with_views_rebuilt(g, b.end(), view);
  }
  return true;
}

}  // namespace

bool matmul_row_order(Graph& graph) {
  bool changed = false;
  for (Node* n : nodes_with_op(graph, "matmul")) changed |= reorder(graph, n);
  if (changed) dce(graph);  // the copies, and the views rebuilt on the new layout
  return changed;
}

}  // namespace kiln
