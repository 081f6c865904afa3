// Compile-time evaluation of constant values: a node whose inputs' bytes are
// known is run here, a view by reading through its layout, any other op with
// its CPU kernel. fold_literals replaces such nodes with literals (small
// results only); a pass that only needs to inspect a constant's values
// (causal_masks) evaluates it without keeping it in the IR.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/graph.h"

namespace kiln {

using Bytes = std::vector<uint8_t>;

// `node`'s results from its inputs' contiguous bytes (in input order), each
// result contiguous. A view reads its input through its layout, which must be
// relative to a contiguous input; nullopt when the node has no CPU kernel.
// Throws kiln::Error when a view reads outside its input.
std::optional<std::vector<Bytes>> evaluate_node(const Node& node, const std::vector<const Bytes*>& inputs);

// The contiguous bytes of `value` when it depends on literals and creation ops
// (arange, full) only, every value on the way at most `max_bytes` and every
// view over a contiguous value; nullopt otherwise (an input or weight on the
// way, an op without a CPU kernel, a larger value).
std::optional<Bytes> evaluate_constant(const Value* value, int64_t max_bytes);

}  // namespace kiln
