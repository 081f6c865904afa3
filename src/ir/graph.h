// The IR: values, nodes and graphs.
//
// A Graph owns its Values and Nodes. Nodes are kept in a valid topological
// order (every input is defined before its user). A Value is one of:
//   input    a graph input, bound at call time
//   weight   an external constant: its data stays in a tensor owned by the
//            caller (Note [Weights] in DESIGN.md); `weight_key` names it
//   literal  a small constant whose bytes live in the IR (contiguous)
//   output   the result of a node
// Each Value keeps its list of users (nodes reading it) so passes can rewrite
// quickly. All mutation goes through Graph so that use lists stay right.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/attr.h"
#include "ir/tensor_type.h"

namespace kiln {

struct OpDef;
class Graph;
struct Node;

enum class ValueKind : uint8_t { input, weight, literal, output };

struct Value {
  std::string name;  // unique in its graph; printed as %name
  TensorType type;
  ValueKind kind = ValueKind::output;
  Node* producer = nullptr;  // for outputs
  int output_index = 0;
  std::string weight_key;             // for weights: the binding name
  std::vector<uint8_t> literal_data;  // for literals: type.numel() * size bytes, contiguous
  std::vector<Node*> users;           // one entry per use (a node using it twice appears twice)

  bool is_constant() const { return kind == ValueKind::weight || kind == ValueKind::literal; }
};

struct Node {
  const OpDef* op = nullptr;
  std::string name;  // unique in its graph; defaults to the first output's name
  std::vector<Value*> inputs;
  std::vector<Value*> outputs;
  Attrs attrs;
  std::shared_ptr<Graph> body;  // for fused groups: inputs map to body inputs, outputs to body outputs
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Deep copy (bodies of fused nodes are copied too).
  std::unique_ptr<Graph> clone() const;

  Value* add_input(const std::string& name, TensorType type);
  Value* add_weight(const std::string& name, TensorType type, std::string weight_key);
  Value* add_literal(const std::string& name, TensorType type, std::vector<uint8_t> bytes);
  // Scalar (0-d) literal of `dtype` holding `v` converted to that dtype.
  Value* add_scalar(double v, DType dtype);

  // Creates a node, infers its output types from the op table, appends it (or
  // inserts it before `before`). Name "" picks a fresh one. Throws kiln::Error
  // naming the node on bad arity, attributes or types.
  Node* add_node(const OpDef& op, std::vector<Value*> inputs, Attrs attrs = {}, const std::string& name = "",
                 const Node* before = nullptr);
  // Same with known output types (parser, fused groups); no inference.
  Node* add_node_typed(const OpDef& op, std::vector<Value*> inputs, Attrs attrs, std::vector<TensorType> out_types,
                       std::vector<std::string> out_names, const std::string& name = "", const Node* before = nullptr);

  void set_outputs(std::vector<Value*> outputs);
  void set_node_input(Node* node, size_t index, Value* value);
  // Every use of `from` (node inputs and graph outputs) now uses `to`.
  void replace_all_uses(Value* from, Value* to);
  // Removes a node whose outputs have no users and are not graph outputs.
  void erase_node(Node* node);
  // Removes an input, weight or literal that has no users and is not an output.
  void erase_value(Value* value);
  // Moves `node` to just before `before` (caller keeps topological order).
  void move_before(Node* node, const Node* before);

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& weights() const { return weights_; }
  const std::vector<Value*>& literals() const { return literals_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  std::vector<Node*> nodes() const;  // topological order
  size_t num_nodes() const { return nodes_.size(); }
  bool is_graph_output(const Value* v) const;

  Value* find_value(std::string_view name) const;
  // Gives `value` a new name, which must be free.
  void rename(Value* value, const std::string& name);
  std::string fresh_name(std::string_view hint = "v");

 private:
  Value* new_value(const std::string& name, TensorType type, ValueKind kind);
  size_t position(const Node* node) const;

  std::vector<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> inputs_, weights_, literals_, outputs_;
  std::unordered_map<std::string, Value*> by_name_;  // every live value, by name
  int64_t next_name_ = 0;
};

}  // namespace kiln
