// The IR verifier: checks every invariant the rest of kiln relies on, so that
// a broken pass is caught right after it runs (DESIGN.md section 6).
//
// verify_graph throws kiln::Error naming the node (and, inside fused bodies,
// the enclosing node) at fault. It checks: values are defined once and before
// use, in this graph (no cycles, nothing borrowed from another graph); use
// lists match node inputs; attrs are complete and well typed; output types
// (strides included) equal what the op's inference gives, or for fused groups
// (kFusedGroup) that the body verifies and matches the node's inputs and
// outputs; graph outputs are defined; weights and literals are well formed.
#pragma once

#include "ir/graph.h"

namespace kiln {

void verify_graph(const Graph& graph);

}  // namespace kiln
