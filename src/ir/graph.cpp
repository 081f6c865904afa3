// Graph construction and mutation; keeps use lists and topological order right.
#include "ir/graph.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "ir/literal.h"
#include "ops/op_def.h"
#include "support/error.h"

namespace kiln {

Value* Graph::new_value(const std::string& name, TensorType type, ValueKind kind) {
  std::string n = name.empty() ? fresh_name() : name;
  KILN_CHECK(find_value(n) == nullptr, "value name '%", n, "' is defined twice");
  auto v = std::make_unique<Value>();
  v->name = std::move(n);
  v->type = std::move(type);
  v->kind = kind;
  by_name_[v->name] = v.get();
  values_.push_back(std::move(v));
  return values_.back().get();
}

Value* Graph::find_value(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : it->second;
}

void Graph::rename(Value* value, const std::string& name) {
  if (value->name == name) return;
  KILN_CHECK(find_value(name) == nullptr, "cannot rename %", value->name, " to %", name, ": the name is taken");
  by_name_.erase(value->name);
  value->name = name;
  by_name_[name] = value;
}

std::string Graph::fresh_name(std::string_view hint) {
  for (;;) {
    std::string n = std::string(hint) + std::to_string(next_name_++);
    if (find_value(n) == nullptr) return n;
  }
}

Value* Graph::add_input(const std::string& name, TensorType type) {
  Value* v = new_value(name, std::move(type), ValueKind::input);
  inputs_.push_back(v);
  return v;
}

Value* Graph::add_weight(const std::string& name, TensorType type, std::string weight_key) {
  Value* v = new_value(name, std::move(type), ValueKind::weight);
  v->weight_key = std::move(weight_key);
  weights_.push_back(v);
  return v;
}

Value* Graph::add_literal(const std::string& name, TensorType type, std::vector<uint8_t> bytes) {
  KILN_CHECK(static_cast<int64_t>(bytes.size()) == type.numel() * static_cast<int64_t>(dtype_size(type.dtype)),
             "literal '%", name, "' of type ", to_string(type), " needs ",
             type.numel() * static_cast<int64_t>(dtype_size(type.dtype)), " bytes, got ", bytes.size());
  KILN_CHECK(type.is_contiguous(), "literal '%", name, "' must be contiguous");
  Value* v = new_value(name.empty() ? fresh_name("c") : name, std::move(type), ValueKind::literal);
  v->literal_data = std::move(bytes);
  literals_.push_back(v);
  return v;
}

Value* Graph::add_scalar(double v, DType dtype) {
  std::vector<uint8_t> bytes(dtype_size(dtype));
  store_scalar(bytes.data(), dtype, v);
  return add_literal("", TensorType(dtype, {}), std::move(bytes));
}

size_t Graph::position(const Node* node) const {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].get() == node) return i;
  fail(ErrorKind::runtime, "node '", node->name, "' is not in this graph");
}

Node* Graph::add_node(const OpDef& op, std::vector<Value*> inputs, Attrs attrs, const std::string& name,
                      const Node* before) {
  std::string node_name = name.empty() ? fresh_name() : name;
  Attrs full = complete_attrs(op, attrs);
  std::vector<TensorType> in_types;
  for (Value* v : inputs) in_types.push_back(v->type);
  std::vector<TensorType> out_types = infer_types(op, in_types, full, node_name);
  std::vector<std::string> out_names;
  for (size_t i = 0; i < out_types.size(); ++i) out_names.push_back(i == 0 ? node_name : fresh_name());
  return add_node_typed(op, std::move(inputs), std::move(full), std::move(out_types), std::move(out_names),
                        node_name, before);
}

Node* Graph::add_node_typed(const OpDef& op, std::vector<Value*> inputs, Attrs attrs,
                            std::vector<TensorType> out_types, std::vector<std::string> out_names,
                            const std::string& name, const Node* before) {
  KILN_CHECK(out_names.size() == out_types.size(), "node '", name, "': ", out_types.size(), " output types but ",
             out_names.size(), " names");
  auto node = std::make_unique<Node>();
  node->op = &op;
  node->attrs = std::move(attrs);
  for (size_t i = 0; i < out_types.size(); ++i) {
    Value* v = new_value(out_names[i], std::move(out_types[i]), ValueKind::output);
    v->producer = node.get();
    v->output_index = static_cast<int>(i);
    node->outputs.push_back(v);
  }
  node->name = name.empty() ? (node->outputs.empty() ? fresh_name("n") : node->outputs[0]->name) : name;
  node->inputs = std::move(inputs);
  for (Value* v : node->inputs) v->users.push_back(node.get());
  Node* raw = node.get();
  if (before == nullptr) {
    nodes_.push_back(std::move(node));
  } else {
    nodes_.insert(nodes_.begin() + static_cast<std::ptrdiff_t>(position(before)), std::move(node));
  }
  return raw;
}

void Graph::set_outputs(std::vector<Value*> outputs) { outputs_ = std::move(outputs); }

namespace {
void remove_one_use(Value* v, Node* user) {
  auto it = std::find(v->users.begin(), v->users.end(), user);
  if (it != v->users.end()) v->users.erase(it);
}
}  // namespace

void Graph::set_node_input(Node* node, size_t index, Value* value) {
  KILN_CHECK(index < node->inputs.size(), "node '", node->name, "' has no input ", index);
  remove_one_use(node->inputs[index], node);
  node->inputs[index] = value;
  value->users.push_back(node);
}

void Graph::replace_all_uses(Value* from, Value* to) {
  if (from == to) return;
  std::vector<Node*> users = from->users;
  for (Node* user : users)
    for (size_t i = 0; i < user->inputs.size(); ++i)
      if (user->inputs[i] == from) set_node_input(user, i, to);
  for (Value*& out : outputs_)
    if (out == from) out = to;
}

bool Graph::is_graph_output(const Value* v) const {
  return std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end();
}

void Graph::erase_node(Node* node) {
  for (Value* out : node->outputs)
    KILN_CHECK(out->users.empty() && !is_graph_output(out), "cannot erase node '", node->name, "': output '%",
               out->name, "' is still used");
  for (Value* in : node->inputs) remove_one_use(in, node);
  size_t pos = position(node);
  for (Value* out : node->outputs) {
    by_name_.erase(out->name);
    values_.erase(std::find_if(values_.begin(), values_.end(), [&](const auto& v) { return v.get() == out; }));
  }
  nodes_.erase(nodes_.begin() + static_cast<std::ptrdiff_t>(pos));
}

void Graph::erase_value(Value* value) {
  KILN_CHECK(value->kind != ValueKind::output, "erase_value: '%", value->name, "' is a node output");
  KILN_CHECK(value->users.empty() && !is_graph_output(value), "cannot erase '%", value->name,
             "': it is still used");
  for (auto* list : {&inputs_, &weights_, &literals_}) std::erase(*list, value);
  by_name_.erase(value->name);
  values_.erase(std::find_if(values_.begin(), values_.end(), [&](const auto& v) { return v.get() == value; }));
}

void Graph::move_before(Node* node, const Node* before) {
  size_t from = position(node);
  std::unique_ptr<Node> owned = std::move(nodes_[from]);
  nodes_.erase(nodes_.begin() + static_cast<std::ptrdiff_t>(from));
  nodes_.insert(nodes_.begin() + static_cast<std::ptrdiff_t>(position(before)), std::move(owned));
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

std::unique_ptr<Graph> Graph::clone() const {
  auto g = std::make_unique<Graph>();
  g->next_name_ = next_name_;
  std::unordered_map<const Value*, Value*> map;
  for (Value* v : inputs_) map[v] = g->add_input(v->name, v->type);
  for (Value* v : weights_) map[v] = g->add_weight(v->name, v->type, v->weight_key);
  for (Value* v : literals_) map[v] = g->add_literal(v->name, v->type, v->literal_data);
  for (const auto& n : nodes_) {
    std::vector<Value*> ins;
    for (Value* v : n->inputs) ins.push_back(map.at(v));
    std::vector<TensorType> types;
    std::vector<std::string> names;
    for (Value* v : n->outputs) {
      types.push_back(v->type);
      names.push_back(v->name);
    }
    Node* copy = g->add_node_typed(*n->op, std::move(ins), n->attrs, std::move(types), std::move(names), n->name);
    if (n->body) copy->body = std::shared_ptr<Graph>(n->body->clone());
    for (size_t i = 0; i < n->outputs.size(); ++i) map[n->outputs[i]] = copy->outputs[i];
  }
  std::vector<Value*> outs;
  for (Value* v : outputs_) outs.push_back(map.at(v));
  g->set_outputs(std::move(outs));
  return g;
}

}  // namespace kiln
