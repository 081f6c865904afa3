// GraphBuilder: the one way the frontend (and the Python API) adds ops to a
// Graph. It applies torch's type promotion before elementwise ops (inserting
// casts), makes Python scalars into literals, and inserts a `contiguous` copy
// before a reshape that cannot be a view. Op semantics stay in the op table.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ir/graph.h"
#include "ops/op_def.h"

namespace kiln {

// An elementwise operand: a tensor value or a Python number ("wrapped scalar"
// in torch's promotion rules: it never raises a tensor's dtype within its category).
using Operand = std::variant<Value*, double, int64_t, bool>;

// The device whose torch kernels the graph's arithmetic with numbers matches
// (Note [Scalars in f16 and bf16] in graph_builder.cpp): the CPU and CUDA
// kernels read a number at different precisions.
enum class EagerDevice { cpu, cuda };

class GraphBuilder {
 public:
  explicit GraphBuilder(Graph& graph) : graph_(graph) {}
  Graph& graph() { return graph_; }
  void set_eager_device(EagerDevice device) { eager_device_ = device; }
  EagerDevice eager_device() const { return eager_device_; }

  // Adds op `name`; returns its outputs.
  std::vector<Value*> op(std::string_view name, std::vector<Value*> inputs, Attrs attrs = {});
  Value* op1(std::string_view name, std::vector<Value*> inputs, Attrs attrs = {});

  // Elementwise op with torch promotion over its operands. `compute` forces
  // the dtype operands are cast to (e.g. true division of ints uses f32).
  Value* elementwise(std::string_view name, std::vector<Operand> operands);

  // The dtype torch would compute `operands` in (dim tensors, then 0-d
  // tensors, then wrapped scalars, each only raising the category).
  DType result_type(const std::vector<Operand>& operands) const;

  Value* cast(Value* v, DType dtype);      // no node when already `dtype`
  Value* scalar(double v, DType dtype);    // 0-d literal
  Value* to_value(const Operand& operand, DType dtype);
  // reshape as a view when possible, else contiguous + reshape.
  Value* reshape(Value* v, const Dims& shape);
  Value* permute(Value* v, const std::vector<int64_t>& dims);

  // Name given to the next node's first output (frontends pass FX node names).
  void set_next_name(std::string name) { next_name_ = std::move(name); }

 private:
  std::string take_name();
  Graph& graph_;
  std::string next_name_;
  EagerDevice eager_device_ = EagerDevice::cpu;
};

}  // namespace kiln
