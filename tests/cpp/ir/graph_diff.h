// Test helper: a structural comparison of two graphs (names, kinds, types with
// strides, weight keys, literal bytes, nodes, ops, attrs with their kinds and
// exact bits, outputs and fused bodies). Returns "" when equal, else the first
// difference, so tests can EXPECT_EQ(graph_diff(a, b), "").
#pragma once

#include <cstring>
#include <string>

#include "ir/graph.h"
#include "ops/op_def.h"

namespace kiln::testing {

inline bool same_attr_value(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  if (const double* x = std::get_if<double>(&a)) return std::memcmp(x, &std::get<double>(b), sizeof(double)) == 0;
  return a == b;
}

inline std::string value_diff(const Value* a, const Value* b, const std::string& at) {
  if (a->name != b->name) return at + ": name '" + a->name + "' vs '" + b->name + "'";
  if (a->kind != b->kind) return at + ": kind differs for %" + a->name;
  if (!(a->type == b->type)) return at + ": type " + to_string(a->type) + " vs " + to_string(b->type);
  if (a->weight_key != b->weight_key) return at + ": weight key '" + a->weight_key + "' vs '" + b->weight_key + "'";
  if (a->literal_data != b->literal_data) return at + ": literal bytes differ for %" + a->name;
  if (a->output_index != b->output_index) return at + ": output index differs for %" + a->name;
  if (a->users.size() != b->users.size()) return at + ": use count differs for %" + a->name;
  return "";
}

inline std::string graph_diff(const Graph& a, const Graph& b, const std::string& at = "graph") {
  auto lists = [&](const std::vector<Value*>& x, const std::vector<Value*>& y, const char* what) -> std::string {
    if (x.size() != y.size()) return at + ": number of " + what + " differs";
    for (size_t i = 0; i < x.size(); ++i)
      if (std::string d = value_diff(x[i], y[i], at + " " + what + " " + std::to_string(i)); !d.empty()) return d;
    return "";
  };
  if (std::string d = lists(a.inputs(), b.inputs(), "inputs"); !d.empty()) return d;
  if (std::string d = lists(a.weights(), b.weights(), "weights"); !d.empty()) return d;
  if (std::string d = lists(a.literals(), b.literals(), "literals"); !d.empty()) return d;
  if (std::string d = lists(a.outputs(), b.outputs(), "outputs"); !d.empty()) return d;
  std::vector<Node*> na = a.nodes(), nb = b.nodes();
  if (na.size() != nb.size()) return at + ": number of nodes differs";
  for (size_t i = 0; i < na.size(); ++i) {
    const Node* x = na[i];
    const Node* y = nb[i];
    std::string here = at + " node '" + x->name + "'";
    if (x->name != y->name) return here + ": name vs '" + y->name + "'";
    if (x->op != y->op) return here + ": op differs";
    if (std::string d = lists(x->inputs, y->inputs, "inputs"); !d.empty()) return here + ": " + d;
    if (std::string d = lists(x->outputs, y->outputs, "outputs"); !d.empty()) return here + ": " + d;
    const auto& ia = x->attrs.items();
    const auto& ib = y->attrs.items();
    if (ia.size() != ib.size()) return here + ": number of attrs differs";
    for (size_t k = 0; k < ia.size(); ++k)
      if (ia[k].first != ib[k].first || !same_attr_value(ia[k].second, ib[k].second))
        return here + ": attr '" + ia[k].first + "' differs";
    if (static_cast<bool>(x->body) != static_cast<bool>(y->body)) return here + ": body presence differs";
    if (x->body)
      if (std::string d = graph_diff(*x->body, *y->body, here + " body"); !d.empty()) return d;
  }
  return "";
}

}  // namespace kiln::testing
