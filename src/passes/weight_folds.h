// Note [Weight folds]: splitting weight-only expressions out of a graph.
//
// A weight-only expression (computed from weights, and maybe literals, alone)
// would otherwise be recomputed on every call. split_weight_folds picks those
// whose folding pays at run time and moves each into its own small graph:
//
//   main graph:  the expression's result is replaced by a new weight whose key
//                is "fold:<n>" (a folded constant, bound like any weight);
//   fold graph:  inputs are the weights the expression reads (source_keys, in
//                order), one output is the folded constant.
//
// The frontend runs the fold graphs one at a time on the weights' device,
// writes each result straight into the buffer it then binds as "fold:<n>", and
// runs a fold again when one of its sources changes (DESIGN.md Note [Weights]).
//
// Policy: only results computed by a non-view node are folded, and only where
// they reach the activation path (directly or through views): a chain of views
// on a weight (a transposed GEMM weight) is never materialized, and views on
// top of a folded result stay views in the main graph. A result is not folded
// when it is larger than the weights it reads (an expand followed by math):
// holding it would cost more memory than recomputing costs time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

struct FoldedConstant {
  std::string key;                       // the main graph's new weight key, "fold:<n>"
  std::unique_ptr<Graph> graph;          // inputs: the source weights; one output
  std::vector<std::string> source_keys;  // weight key read by each fold-graph input
};

inline constexpr std::string_view kFoldKeyPrefix = "fold:";

// Rewrites `graph` as described above and returns the fold graphs (none when
// nothing pays). Running it again finds nothing more to fold.
std::vector<FoldedConstant> split_weight_folds(Graph& graph);

}  // namespace kiln
