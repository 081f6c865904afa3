// View layouts: how a view op's output (trait kView) lays over its input's
// storage. Shape inference and the runtime both use this one computation, so
// the strides a kernel reads through and the offset the runtime binds agree.
//
// Note [Views are resolved by the runtime]
// View ops (reshape, permute, expand, slice, select, squeeze, unsqueeze,
// as_strided) have no CPU kernel. Output 0 ALIASES input 0: its TensorType carries dims and
// strides (in elements) derived from input 0's strides, and its first element
// sits `view_offset(node)` elements past input 0's data pointer. The runtime
// binds the output to `input.data + view_offset(node) * dtype_size(dtype)`
// (chaining offsets through views of views) and never copies. A view never
// needs a copy: reshape of a layout that cannot be viewed is rejected by
// inference, and the graph builder inserts `contiguous` first.
#pragma once

#include <cstdint>
#include <string_view>

#include "ir/attr.h"
#include "ir/graph.h"
#include "ir/tensor_type.h"

namespace kiln {

// The output type of a view op over `input` and its element offset.
struct ViewLayout {
  TensorType type;
  int64_t offset = 0;
};

// Computes the layout of view op `op` (by name) over `input` with complete
// attrs. Throws kiln::Error (without the node name; infer_types adds it) on
// bad attributes, and for ops that are not views.
ViewLayout view_layout(std::string_view op, const TensorType& input, const Attrs& attrs);

// The element offset of `node`'s output 0 relative to input 0's data pointer:
// 0 for reshape, permute, expand, squeeze and unsqueeze; start * stride for
// slice; index * stride for select; the offset attribute for as_strided. Throws if `node` is not a view op.
int64_t view_offset(const Node& node);

// Strides that view `dims`/`strides` as `new_dims` without copying (same
// numel), or false when the layout does not allow it. Exposed for passes.
bool reshape_strides(const Dims& dims, const Dims& strides, const Dims& new_dims, Dims* new_strides);

}  // namespace kiln
