// Random graphs for planner and executable tests: DAGs of elementwise ops
// (bounded math, so values stay finite) over a few broadcast-compatible
// shapes, optionally with view ops (permute, slice, select, unsqueeze,
// expand, reshape) over inputs, intermediates and a [7, 8] literal (whose
// views and ops fold at compile time). Deterministic per seed.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/literal.h"
#include "ops/op_def.h"
#include "support/error.h"

namespace kiln::test {

inline std::unique_ptr<Graph> random_graph(uint32_t seed, bool with_views) {
  static const std::vector<Dims> kShapes = {{8}, {1, 8}, {5, 8}, {5, 1}, {}, {5, 8}, {7, 8}};
  static const char* const kUnary[] = {"relu", "neg", "abs", "tanh", "sigmoid", "sin"};
  static const char* const kBinary[] = {"add", "mul", "sub", "maximum", "minimum"};
  std::mt19937 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(std::uniform_int_distribution<size_t>(0, n - 1)(rng)); };
  auto g = std::make_unique<Graph>();
  std::vector<Value*> pool;
  const size_t num_shapes = with_views ? kShapes.size() : kShapes.size() - 1;
  const int num_inputs = 1 + static_cast<int>(pick(3));
  for (int i = 0; i < num_inputs; ++i)
    pool.push_back(g->add_input("x" + std::to_string(i), TensorType(DType::f32, kShapes[pick(num_shapes)])));
  if (pick(2)) pool.push_back(g->add_weight("w", TensorType(DType::f32, kShapes[pick(num_shapes)]), "layer.w"));
  if (pick(2)) pool.push_back(g->add_scalar(0.5, DType::f32));
  Value* table = nullptr;
  if (with_views && pick(2)) {
    const TensorType t(DType::f32, {7, 8});
    std::vector<uint8_t> bytes(static_cast<size_t>(t.numel()) * 4);
    for (int64_t i = 0; i < t.numel(); ++i) store_scalar(bytes.data() + i * 4, DType::f32, 0.25 * (i % 9) - 1.0);
    table = g->add_literal("table", t, std::move(bytes));
    pool.push_back(table);
  }
  // Prefer recent values so that chains (and reuse) are common.
  auto operand = [&]() -> Value* {
    if (pool.size() > 4 && pick(3) != 0) return pool[pool.size() - 1 - pick(4)];
    return pool[pick(pool.size())];
  };
  auto ints = [](std::vector<int64_t> v) { return AttrValue(std::move(v)); };
  const int num_nodes = 1 + static_cast<int>(pick(40));
  std::vector<Value*> produced;
  for (int i = 0; i < num_nodes; ++i) {
    Node* node = nullptr;
    const size_t kind = pick(with_views ? 3 : 2);
    for (int attempt = 0; attempt < 8 && node == nullptr; ++attempt) {
      try {
        if (kind == 0) {
          node = g->add_node(get_op(kUnary[pick(std::size(kUnary))]), {operand()});
        } else if (kind == 1) {
          node = g->add_node(get_op(kBinary[pick(std::size(kBinary))]), {operand(), operand()});
        } else {
          Value* x = table != nullptr && pick(4) == 0 ? table : operand();
          Attrs a;
          switch (pick(6)) {
            case 0:
              a.set("dims", ints({1, 0}));
              node = g->add_node(get_op("permute"), {x}, a);
              break;
            case 1:
              a.set("dim", int64_t{0});
              a.set("start", int64_t{2});
              a.set("end", int64_t{7});
              node = g->add_node(get_op("slice"), {x}, a);
              break;
            case 2:
              a.set("dim", int64_t{0});
              a.set("index", int64_t{1 + static_cast<int64_t>(pick(3))});
              node = g->add_node(get_op("select"), {x}, a);
              break;
            case 3:
              a.set("dim", int64_t{0});
              node = g->add_node(get_op("unsqueeze"), {x}, a);
              break;
            case 4:
              a.set("shape", ints({5, 8}));
              node = g->add_node(get_op("expand"), {x}, a);
              break;
            default:
              a.set("shape", ints({-1}));
              node = g->add_node(get_op("reshape"), {x}, a);
              break;
          }
        }
      } catch (const Error&) {
        node = nullptr;  // incompatible operands: try others
      }
    }
    if (node == nullptr) node = g->add_node(get_op("relu"), {pool.back()});
    pool.push_back(node->outputs[0]);
    produced.push_back(node->outputs[0]);
  }
  // Outputs: the last value, plus random others (possibly inputs, weights,
  // literals, views, and duplicates).
  std::vector<Value*> outs = {produced.back()};
  const int extra = static_cast<int>(pick(4));
  for (int i = 0; i < extra; ++i) outs.push_back(pool[pick(pool.size())]);
  g->set_outputs(outs);
  return g;
}

}  // namespace kiln::test
