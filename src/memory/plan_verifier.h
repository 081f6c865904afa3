// The memory plan verifier: proves a plan safe for its graph, independently of
// how it was made (so it also checks plans of future strategies or ones read
// from an artifact).
#pragma once

#include "ir/graph.h"
#include "memory/memory_plan.h"

namespace kiln {

// Throws kiln::Error(runtime) naming the values at fault unless:
//  - every value of the graph has a placement of the right kind (inputs,
//    weights and literals where the caller / IR keeps them, never in the arena);
//  - graph outputs are written into the caller's buffer or copied there
//    (each output slot exactly once), never placed in the arena;
//  - arena buffers are aligned, hold numel * itemsize bytes, lie inside the arena;
//  - every arena buffer is live from its producing node to every read of it,
//    direct or through views, with graph outputs read after the last node;
//  - no two arena buffers that are live at a common position share a byte;
//  - views name their node's input 0 as source, their chain's root as root,
//    and stay inside their root's bytes.
void verify_memory_plan(const Graph& graph, const MemoryPlan& plan);

}  // namespace kiln
