// The arithmetic type a fused group (Note [Fused groups] in fused_ops.cpp)
// computes in, one rule for every backend: f64 when any value of the body is
// f64, else f32 when any is floating (f16/bf16 values are rounded to their
// dtype after each step), else i64. A body that mixes integer and floating
// values, or a node that does not match its body, has no compute type.
#pragma once

#include <optional>
#include <string>

#include "ir/graph.h"

namespace kiln {

enum class FusedCompute { i64, f32, f64 };

// The compute type of fused `node`, or nullopt with `reason` set.
std::optional<FusedCompute> fused_compute_type(const Node& node, std::string* reason);

}  // namespace kiln
