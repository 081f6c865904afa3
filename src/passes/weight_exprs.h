// Weight-only expressions (Note [Weight folds]): which values of a graph are
// computed from constants alone, and which of those read at least one weight.
// A literal-only expression is fold_literals' business; a weight-only one may
// change when the caller updates a weight in place, so it is folded at run
// time by the frontend (split_weight_folds), never into the IR.
#pragma once

#include <unordered_set>

#include "ir/graph.h"

namespace kiln {

struct WeightExprs {
  std::unordered_set<const Value*> constant;     // literals, weights, and outputs of nodes whose inputs all are
  std::unordered_set<const Value*> weight_only;  // the constant values that depend on at least one weight

  bool is_constant(const Value* v) const { return constant.count(v) != 0; }
  bool is_weight_only(const Value* v) const { return weight_only.count(v) != 0; }
};

WeightExprs find_weight_exprs(const Graph& graph);

// True when every output of `node` is constant (a node of a constant expression).
bool is_constant_node(const WeightExprs& exprs, const Node& node);

}  // namespace kiln
