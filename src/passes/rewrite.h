// Graph surgery shared by the passes that fuse a chain of nodes into new ones.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace kiln {

// The node producing `v` when its op is `op`, else null.
Node* producer_of(const Value* v, std::string_view op);
// `v` has exactly one use, and is not a graph output.
bool single_use(const Value* v, const Graph& g);
// `v` is a literal whose every element equals `value` (as a double).
bool literal_all_equal(const Value* v, double value);
// Note [Scalars in f16 and bf16] (builder/graph_builder.cpp): the builder makes
// a mul or div of an f16/bf16 value by a number that dtype cannot hold
// cast(op(cast(x, f32), c), dtype), c a rank-0 f32 literal. For `v` of that
// form: the op node (mul or div, its inputs the widened x and c in either
// order) and x; `op` is null otherwise.
struct WidenedScalarOp {
  Node* op = nullptr;
  Value* x = nullptr;
};
WidenedScalarOp widened_scalar_op(const Value* v);
// The nodes reading `v`, each once, in the order of v->users (which lists a node once per use).
std::vector<Node*> distinct_users(const Value* v);
// The graph's nodes of op `op`, in order: collected before a pass rewrites around them.
std::vector<Node*> nodes_with_op(const Graph& graph, std::string_view op);

// `replacement` takes the place of `tail`'s output: every use of it (graph
// outputs included) moves to `replacement`, `tail` and then the nodes of
// `dead` (producers left without users, in order) are erased, and
// `replacement` takes the old output's name. Node names stay the caller's.
void replace_output(Graph& graph, Node* tail, Value* replacement, const std::vector<Node*>& dead = {});

// Whether every view reading `from` (transitively) can read a value of type
// `to` instead (same dims, other strides): a reshape may no longer be a view,
// and an as_strided's strides are tied to its input's layout, so neither may
// be in the way.
bool views_can_follow(const Value* from, const TensorType& to);
// Moves every use of `from` to `to` (same dims, other strides; check
// views_can_follow first): the views reading `from` are rebuilt on `to`, so
// their types (strides) follow, and the old ones are erased.
void replace_with_views_rebuilt(Graph& graph, Value* from, Value* to);

// The attributes of a reshape to `shape` and of a permute by `dims`.
Attrs reshape_attrs(std::vector<int64_t> shape);
Attrs permute_attrs(std::vector<int64_t> dims);

}  // namespace kiln
