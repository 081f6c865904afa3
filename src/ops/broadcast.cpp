// Broadcasting and axis helpers.
#include "ops/broadcast.h"

#include <algorithm>

#include "support/error.h"

namespace kiln {

Dims broadcast_dims(std::span<const Dims> all) {
  size_t rank = 0;
  for (const Dims& d : all) rank = std::max(rank, d.size());
  Dims out(rank, 1);
  for (const Dims& d : all) {
    size_t offset = rank - d.size();
    for (size_t i = 0; i < d.size(); ++i) {
      int64_t& o = out[offset + i];
      if (d[i] == o || d[i] == 1) continue;
      KILN_CHECK(o == 1, "shapes cannot broadcast: [", dims_to_string(out), "] vs [", dims_to_string(d), "]");
      o = d[i];
    }
  }
  return out;
}

Dims broadcast_strides(const TensorType& type, const Dims& target) {
  Dims strides(target.size(), 0);
  size_t offset = target.size() - type.rank();
  for (size_t i = 0; i < type.rank(); ++i)
    strides[offset + i] = (type.dims[i] == 1 && target[offset + i] != 1) ? 0 : type.strides[i];
  return strides;
}

int64_t normalize_axis(int64_t axis, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  KILN_CHECK(axis >= -r && axis < r, "axis ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + r : axis;
}

std::vector<int64_t> normalize_axes(std::span<const int64_t> axes, int64_t rank) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int64_t a : axes) out.push_back(normalize_axis(a, rank));
  std::sort(out.begin(), out.end());
  KILN_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), "repeated axis in reduction");
  return out;
}

}  // namespace kiln
