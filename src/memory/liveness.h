// Liveness over the scheduled graph: for each value, where its bytes come from
// (its root: itself, or for a view the value whose storage it aliases) and the
// node positions over which those bytes must stay intact. The memory planner
// (memory_plan.cpp) builds on this; the plan verifier recomputes it to check.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace kiln {

// Positions: node i of graph.nodes() is position i; graph outputs are read at
// position N (= the number of nodes), after every node has run.
struct ValueLiveness {
  const Value* value = nullptr;
  const Value* root = nullptr;  // the non-view value whose storage this one uses
  const Node* view_node = nullptr;  // the node producing it when it is a view
  int def = -1;       // position of the producing node; -1 for inputs, weights, literals
  int last_use = -1;  // last position reading it, directly or through views of it; -1 if never read
};

struct Liveness {
  int num_positions = 0;  // number of nodes
  std::vector<ValueLiveness> values;  // inputs, weights, literals, then node outputs in node order
  std::unordered_map<const Value*, size_t> index;

  const ValueLiveness& at(const Value* v) const;
};

// True for node outputs that alias their node's input 0 (OpTrait kView, output 0).
bool is_view_value(const Value& value);

// Computes roots and intervals. A use of a view counts as a use of its root
// (transitively through chains of views), so a buffer stays alive as long as
// any view of it is read. Graph outputs count as used at position N.
Liveness compute_liveness(const Graph& graph);

}  // namespace kiln
