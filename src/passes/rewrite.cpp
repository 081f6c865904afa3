// Graph surgery shared by the fusing passes (see rewrite.h).
#include "passes/rewrite.h"

#include <algorithm>
#include <string>
#include <utility>

#include "ir/literal.h"
#include "ops/op_def.h"
#include "ops/view_offset.h"
#include "support/error.h"

namespace kiln {

Node* producer_of(const Value* v, std::string_view op) {
  return v->producer != nullptr && v->producer->op->name == op ? v->producer : nullptr;
}

bool single_use(const Value* v, const Graph& g) { return v->users.size() == 1 && !g.is_graph_output(v); }

bool literal_all_equal(const Value* v, double value) {
  if (v->kind != ValueKind::literal) return false;
  const size_t size = dtype_size(v->type.dtype);
  for (size_t off = 0; off + size <= v->literal_data.size(); off += size)
    if (load_scalar(v->literal_data.data() + off, v->type.dtype) != value) return false;
  return true;
}

WidenedScalarOp widened_scalar_op(const Value* v) {
  const DType dtype = v->type.dtype;
  const Node* narrow = producer_of(v, "cast");
  if (!is_half(dtype) || narrow == nullptr) return {};
  Node* op = narrow->inputs[0]->producer;
  if (op == nullptr || (op->op->name != "mul" && op->op->name != "div") || op->inputs.size() != 2 ||
      op->outputs[0]->type.dtype != DType::f32)
    return {};
  for (size_t i = 0; i < 2; ++i) {
    const Value* c = op->inputs[1 - i];
    const Node* widen = producer_of(op->inputs[i], "cast");
    if (c->kind != ValueKind::literal || c->type.rank() != 0 || c->type.dtype != DType::f32 || widen == nullptr)
      continue;
    Value* x = widen->inputs[0];
    if (x->type.dtype == dtype && x->type.dims == v->type.dims) return {op, x};
  }
  return {};
}

std::vector<Node*> distinct_users(const Value* v) {
  std::vector<Node*> users;
  for (Node* u : v->users)
    if (std::find(users.begin(), users.end(), u) == users.end()) users.push_back(u);
  return users;
}

std::vector<Node*> nodes_with_op(const Graph& graph, std::string_view op) {
  std::vector<Node*> found;
  for (Node* n : graph.nodes())
    if (n->op->name == op) found.push_back(n);
  return found;
}

void replace_output(Graph& graph, Node* tail, Value* replacement, const std::vector<Node*>& dead) {
  Value* out = tail->outputs[0];
  const std::string name = out->name;
  graph.replace_all_uses(out, replacement);
  graph.erase_node(tail);
  for (Node* n : dead) graph.erase_node(n);
  graph.rename(replacement, name);  // free now that its value is gone
}

bool views_can_follow(const Value* from, const TensorType& to) {
  for (const Node* u : distinct_users(from)) {
    if (!u->op->has(kView)) continue;
    if (u->op->name == "as_strided" || u->inputs.size() != 1 || u->outputs.size() != 1) return false;
    TensorType next;
    try {
      next = view_layout(u->op->name, to, u->attrs).type;
    } catch (const Error&) {
      return false;
    }
    if (!views_can_follow(u->outputs[0], next)) return false;
  }
  return true;
}

void replace_with_views_rebuilt(Graph& graph, Value* from, Value* to) {
  std::vector<Node*> old_views;
  for (Node* u : distinct_users(from)) {
    if (!u->op->has(kView)) continue;
    Node* rebuilt = graph.add_node(*u->op, {to}, u->attrs, "", u);
    replace_with_views_rebuilt(graph, u->outputs[0], rebuilt->outputs[0]);
    old_views.push_back(u);
  }
  graph.replace_all_uses(from, to);  // the other users and graph outputs (the old views read `to` now)
  for (Node* u : old_views) graph.erase_node(u);  // nothing reads them any more
}

Attrs reshape_attrs(std::vector<int64_t> shape) {
  Attrs a;
  a.set("shape", std::move(shape));
  return a;
}

Attrs permute_attrs(std::vector<int64_t> dims) {
  Attrs a;
  a.set("dims", std::move(dims));
  return a;
}

}  // namespace kiln
