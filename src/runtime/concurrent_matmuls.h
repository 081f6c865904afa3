// Which matrix products of a graph may run at the same time on a device: a
// span of consecutive compute nodes (views between them are free) that are all
// matmul or matmul_epilogue and none of which reads another's result. BERT's
// query, key and value products are one such span per layer: three small
// products that each fill part of a GPU at batch 1, run side by side instead
// of one after another (Note [Concurrent matmuls] in runtime/executable.h).
#pragma once

#include <vector>

#include "ir/graph.h"

namespace kiln {

struct ConcurrentSpan {
  int first = 0, last = 0;  // node positions: the span's first and last products
  int branches = 0;         // products in the span (views between them are not counted)
};

// Spans of at least two and at most `max_branches` products, in node order.
std::vector<ConcurrentSpan> find_concurrent_matmuls(const Graph& graph, int max_branches);

}  // namespace kiln
