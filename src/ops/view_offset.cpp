// View layouts (Note [Views are resolved by the runtime] in view_offset.h):
// dims, strides and element offset of each view op's output, computed from
// input 0's type and the node's attrs. Shape inference for view ops and the
// runtime's pointer binding both call view_layout.
#include "ops/view_offset.h"

#include <algorithm>
#include <limits>

#include "ops/broadcast.h"
#include "ops/op_def.h"
#include "support/error.h"

namespace kiln {

namespace {

std::string shape_text(const std::vector<int64_t>& v) { return str_cat("[", dims_to_string(v), "]"); }

// Resolves a reshape target: at most one -1, the rest non-negative, same numel.
Dims resolve_shape(const TensorType& in, const std::vector<int64_t>& shape) {
  Dims out = shape;
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      KILN_CHECK(infer_at < 0, "shape ", shape_text(shape), " has more than one -1");
      infer_at = static_cast<int>(i);
      continue;
    }
    KILN_CHECK(out[i] >= 0, "shape ", shape_text(shape), " has a negative size ", out[i]);
    known *= out[i];
  }
  int64_t n = in.numel();
  if (infer_at >= 0) {
    KILN_CHECK(known != 0, "cannot reshape a tensor of ", n, " elements into shape ", shape_text(shape),
               ": the -1 could be any size");
    KILN_CHECK(n % known == 0, "shape ", shape_text(shape), " is invalid for input of size ", n);
    out[static_cast<size_t>(infer_at)] = n / known;
  } else {
    KILN_CHECK(known == n, "shape ", shape_text(shape), " is invalid for input of size ", n);
  }
  return out;
}

ViewLayout reshape_layout(const TensorType& in, const Attrs& attrs) {
  Dims dims = resolve_shape(in, attrs.get_ints("shape"));
  Dims strides;
  KILN_CHECK(reshape_strides(in.dims, in.strides, dims, &strides), "reshape of ", to_string(in), " to ",
             shape_text(dims), " needs a copy: the input's strides do not allow a view (insert contiguous first)");
  return {TensorType(in.dtype, std::move(dims), std::move(strides)), 0};
}

ViewLayout permute_layout(const TensorType& in, const Attrs& attrs) {
  const std::vector<int64_t>& perm = attrs.get_ints("dims");
  const int64_t rank = static_cast<int64_t>(in.rank());
  KILN_CHECK(static_cast<int64_t>(perm.size()) == rank, "dims ", shape_text(perm),
             " is not a permutation of the ", rank, " axes of ", to_string(in));
  std::vector<bool> seen(perm.size(), false);
  Dims dims, strides;
  for (int64_t p : perm) {
    KILN_CHECK(p >= -rank && p < rank, "dims ", shape_text(perm), " is not a permutation: axis ", p,
               " is out of range for rank ", rank);
    int64_t a = p < 0 ? p + rank : p;
    KILN_CHECK(!seen[static_cast<size_t>(a)], "dims ", shape_text(perm), " is not a permutation: axis ", a,
               " repeats");
    seen[static_cast<size_t>(a)] = true;
    dims.push_back(in.dims[static_cast<size_t>(a)]);
    strides.push_back(in.strides[static_cast<size_t>(a)]);
  }
  return {TensorType(in.dtype, std::move(dims), std::move(strides)), 0};
}

ViewLayout expand_layout(const TensorType& in, const Attrs& attrs) {
  const std::vector<int64_t>& shape = attrs.get_ints("shape");
  KILN_CHECK(shape.size() >= in.rank(), "cannot expand ", to_string(in), " to ", shape_text(shape),
             ": the target has fewer dims than the input");
  const size_t lead = shape.size() - in.rank();
  Dims dims(shape.size()), strides(shape.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t target = shape[i];
    if (i < lead) {
      KILN_CHECK(target >= 0, "cannot expand ", to_string(in), " to ", shape_text(shape), ": size ", target,
                 " at new leading dim ", i, " is not allowed");
      dims[i] = target;
      continue;
    }
    int64_t size = in.dims[i - lead], stride = in.strides[i - lead];
    KILN_CHECK(target >= -1, "cannot expand ", to_string(in), " to ", shape_text(shape), ": negative size ",
               target);
    if (target == -1 || target == size) {
      dims[i] = size;
      strides[i] = stride;
    } else {
      KILN_CHECK(size == 1, "cannot expand ", to_string(in), " to ", shape_text(shape), ": dim ", i - lead,
                 " has size ", size, " (only size-1 dims expand) but the target is ", target);
      dims[i] = target;
    }
  }
  return {TensorType(in.dtype, std::move(dims), std::move(strides)), 0};
}

// A rank-0 tensor has no axis to slice or select.
int64_t axis_of(const TensorType& in, int64_t dim, const char* op) {
  KILN_CHECK(in.rank() > 0, op, " needs a tensor with at least one dim, got ", to_string(in));
  const int64_t rank = static_cast<int64_t>(in.rank());
  KILN_CHECK(dim >= -rank && dim < rank, "dim ", dim, " is out of range for ", to_string(in), " (rank ", rank,
             ")");
  return dim < 0 ? dim + rank : dim;
}

ViewLayout slice_layout(const TensorType& in, const Attrs& attrs) {
  const size_t d = static_cast<size_t>(axis_of(in, attrs.get_int("dim"), "slice"));
  int64_t start = attrs.get_int("start"), end = attrs.get_int("end"), step = attrs.get_int("step");
  KILN_CHECK(step > 0, "slice step must be positive, got ", step);
  const int64_t size = in.dims[d];
  // Like torch: negative bounds count from the end, then both clamp to [0, size].
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  TensorType out = in;
  out.dims[d] = (end - start + step - 1) / step;
  out.strides[d] = in.strides[d] * step;
  return {std::move(out), start * in.strides[d]};
}

ViewLayout select_layout(const TensorType& in, const Attrs& attrs) {
  const size_t d = static_cast<size_t>(axis_of(in, attrs.get_int("dim"), "select"));
  int64_t index = attrs.get_int("index");
  const int64_t size = in.dims[d];
  KILN_CHECK(index >= -size && index < size, "select index ", index, " is out of range for dim ", d, " of size ",
             size);
  if (index < 0) index += size;
  TensorType out = in;
  out.dims.erase(out.dims.begin() + static_cast<std::ptrdiff_t>(d));
  out.strides.erase(out.strides.begin() + static_cast<std::ptrdiff_t>(d));
  return {std::move(out), index * in.strides[d]};
}

ViewLayout squeeze_layout(const TensorType& in, const Attrs& attrs) {
  // Empty dims: every size-1 axis. Listed axes that are not size 1 stay (like torch).
  std::vector<int64_t> axes = normalize_axes(attrs.get_ints("dims"), static_cast<int64_t>(in.rank()));
  TensorType out(in.dtype, {}, {});
  for (size_t i = 0; i < in.rank(); ++i) {
    bool listed = std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(i));
    if (listed && in.dims[i] == 1) continue;
    out.dims.push_back(in.dims[i]);
    out.strides.push_back(in.strides[i]);
  }
  return {std::move(out), 0};
}

// The largest element offset `t` addresses past its first element (strides are non-negative in views).
int64_t last_offset(const Dims& dims, const Dims& strides) {
  int64_t last = 0;
  for (size_t i = 0; i < dims.size(); ++i) last += (dims[i] - 1) * strides[i];
  return last;
}

// Given dims and strides (in the input's element space) from `offset` elements past the input's first
// element; every element it addresses lies within the input's span. Built by passes, never imported.
ViewLayout as_strided_layout(const TensorType& in, const Attrs& attrs) {
  const std::vector<int64_t>& shape = attrs.get_ints("shape");
  const std::vector<int64_t>& strides = attrs.get_ints("strides");
  const int64_t offset = attrs.get_int("offset");
  KILN_CHECK(shape.size() == strides.size(), "as_strided shape ", shape_text(shape), " and strides ",
             shape_text(strides), " differ in rank");
  bool empty = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    KILN_CHECK(shape[i] >= 0 && strides[i] >= 0, "as_strided shape ", shape_text(shape), " and strides ",
               shape_text(strides), " must not be negative");
    empty |= shape[i] == 0;
  }
  KILN_CHECK(offset >= 0, "as_strided offset ", offset, " is negative");
  if (!empty) {
    KILN_CHECK(in.numel() > 0 && offset + last_offset(shape, strides) <= last_offset(in.dims, in.strides),
               "as_strided ", shape_text(shape), " strides ", shape_text(strides), " from offset ", offset,
               " reaches past ", to_string(in));
  }
  return {TensorType(in.dtype, shape, strides), offset};
}

ViewLayout unsqueeze_layout(const TensorType& in, const Attrs& attrs) {
  const int64_t rank = static_cast<int64_t>(in.rank());
  int64_t dim = attrs.get_int("dim");
  KILN_CHECK(dim >= -rank - 1 && dim <= rank, "dim ", dim, " is out of range for unsqueeze of ", to_string(in),
             " (valid: ", -rank - 1, " to ", rank, ")");
  if (dim < 0) dim += rank + 1;
  const size_t d = static_cast<size_t>(dim);
  int64_t stride = d < in.rank() ? in.dims[d] * in.strides[d] : 1;
  TensorType out = in;
  out.dims.insert(out.dims.begin() + dim, 1);
  out.strides.insert(out.strides.begin() + dim, stride);
  return {std::move(out), 0};
}

}  // namespace

bool reshape_strides(const Dims& dims, const Dims& strides, const Dims& new_dims, Dims* new_strides) {
  *new_strides = contiguous_strides(new_dims);
  if (numel(dims) == 0 || numel(new_dims) == 0) return numel(dims) == numel(new_dims);
  // Group the input's non-trivial axes into chunks that are contiguous among
  // themselves (outer stride == inner stride * inner size); innermost chunk last.
  struct Chunk {
    int64_t numel, stride;
  };
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!chunks.empty() && chunks.back().stride == strides[i] * dims[i]) {
      chunks.back().numel *= dims[i];
      chunks.back().stride = strides[i];
    } else {
      chunks.push_back({dims[i], strides[i]});
    }
  }
  // Split each chunk, innermost first, into the new dims.
  auto chunk = chunks.rbegin();
  int64_t left = chunk != chunks.rend() ? chunk->numel : 1;
  int64_t stride = chunk != chunks.rend() ? chunk->stride : 1;
  for (size_t i = new_dims.size(); i-- > 0;) {
    const int64_t n = new_dims[i];
    (*new_strides)[i] = stride;
    if (n == 1) continue;
    if (chunk == chunks.rend() || left % n != 0) return false;
    stride *= n;
    left /= n;
    if (left == 1 && ++chunk != chunks.rend()) {
      left = chunk->numel;
      stride = chunk->stride;
    }
  }
  return chunk == chunks.rend();
}

ViewLayout view_layout(std::string_view op, const TensorType& input, const Attrs& attrs) {
  if (op == "reshape") return reshape_layout(input, attrs);
  if (op == "permute") return permute_layout(input, attrs);
  if (op == "expand") return expand_layout(input, attrs);
  if (op == "slice") return slice_layout(input, attrs);
  if (op == "select") return select_layout(input, attrs);
  if (op == "squeeze") return squeeze_layout(input, attrs);
  if (op == "unsqueeze") return unsqueeze_layout(input, attrs);
  if (op == "as_strided") return as_strided_layout(input, attrs);
  fail(ErrorKind::invalid_argument, "op '", op, "' is not a view op");
}

int64_t view_offset(const Node& node) {
  KILN_CHECK(node.op != nullptr && node.op->has(kView), "node '", node.name, "' is not a view op");
  KILN_CHECK(!node.inputs.empty(), "node '", node.name, "' (", node.op->name, ") has no input to view");
  try {
    return view_layout(node.op->name, node.inputs[0]->type, node.attrs).offset;
  } catch (const Error& e) {
    throw Error(e.kind(), str_cat("node '", node.name, "' (", node.op->name, "): ", e.what()));
  }
}

}  // namespace kiln
