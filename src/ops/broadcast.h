// Broadcasting of dims (numpy/torch rules) and axis normalization, shared by
// shape inference, the graph builder and kernels.
#pragma once

#include <span>
#include <vector>

#include "ir/tensor_type.h"

namespace kiln {

// The broadcast of several dims lists; throws kiln::Error naming the dims.
Dims broadcast_dims(std::span<const Dims> all);
// Strides to read `type` as if it had `target` dims (0 stride on broadcast axes).
Dims broadcast_strides(const TensorType& type, const Dims& target);
// Maps a possibly negative axis into [0, rank); throws when out of range.
int64_t normalize_axis(int64_t axis, int64_t rank);
// Normalizes a list of axes, sorted and unique; an empty list means all axes.
std::vector<int64_t> normalize_axes(std::span<const int64_t> axes, int64_t rank);

}  // namespace kiln
