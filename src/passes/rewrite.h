// Graph surgery shared by the passes that fuse a chain of nodes into new ones.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "ir/graph.h"

namespace kiln {

// `replacement` takes the place of `tail`'s output: every use of it (graph
// outputs included) moves to `replacement`, `tail` and then the nodes of
// `dead` (producers left without users, in order) are erased, and
// `replacement` takes the old output's name. Node names stay the caller's.
void replace_output(Graph& graph, Node* tail, Value* replacement, std::initializer_list<Node*> dead = {});

// The attributes of a reshape to `shape` and of a permute by `dims`.
Attrs reshape_attrs(std::vector<int64_t> shape);
Attrs permute_attrs(std::vector<int64_t> dims);

}  // namespace kiln
