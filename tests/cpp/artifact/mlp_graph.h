// The small program the artifact tests save and load: relu(x @ w1 + b1) @ w2
// (outputs y and the hidden h), with w2 of the given type, so that a strided
// (permuted or padded) weight is saved and bound with its layout.
#pragma once

#include <memory>

#include "ir/graph.h"
#include "ops/op_def.h"
#include "passes/pass.h"

namespace kiln {

inline std::unique_ptr<Graph> mlp_graph(const TensorType& w2_type = TensorType(DType::f32, {8, 3}, {1, 8})) {
  auto g = std::make_unique<Graph>();
  Value* x = g->add_input("x", TensorType(DType::f32, {2, 4}));
  Value* w1 = g->add_weight("w1", TensorType(DType::f32, {4, 8}), "fc1.weight");
  Value* b1 = g->add_weight("b1", TensorType(DType::f32, {8}), "fc1.bias");
  Value* w2 = g->add_weight("w2", w2_type, "fc2.weight");
  Value* h = g->add_node(get_op("matmul"), {x, w1})->outputs[0];
  h = g->add_node(get_op("add"), {h, b1})->outputs[0];
  h = g->add_node(get_op("relu"), {h})->outputs[0];
  Value* y = g->add_node(get_op("matmul"), {h, w2})->outputs[0];
  g->set_outputs({y, h});
  run_pipeline(*g);
  return g;
}

}  // namespace kiln
