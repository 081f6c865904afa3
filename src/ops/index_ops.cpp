// Index op declarations: gather, index_select and embedding. Each reads
// elements of its first input at positions given by an integer tensor; the
// kernels check every index at run time (never read out of bounds).
#include <algorithm>
#include <string>

#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::ops_internal {

namespace {

int64_t axis_in(int64_t dim, const TensorType& x) {
  const int64_t rank = std::max<int64_t>(static_cast<int64_t>(x.rank()), 1);  // rank 0 acts as rank 1
  KILN_CHECK(dim >= -rank && dim < rank, "dim ", dim, " is out of range for ", to_string(x));
  return dim < 0 ? dim + rank : dim;
}

void check_index_dtype(const TensorType& index, const char* what) {
  KILN_CHECK(index.dtype == DType::i64 || index.dtype == DType::i32, what, " must be i64 or i32, got ",
             dtype_name(index.dtype));
}

// torch.gather: out[i..] = x[i.. with i_dim replaced by index[i..]]; output has
// index's dims; index has x's rank and is no larger than x outside `dim`.
std::vector<TensorType> infer_gather(std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType &x = in[0], &index = in[1];
  const size_t d = static_cast<size_t>(axis_in(attrs.get_int("dim"), x));
  check_index_dtype(index, "index");
  KILN_CHECK(index.rank() == x.rank(), "index ", to_string(index), " must have the rank of x ", to_string(x));
  for (size_t k = 0; k < index.rank(); ++k)
    KILN_CHECK(k == d || index.dims[k] <= x.dims[k], "index ", to_string(index), " is larger than x ",
               to_string(x), " in dim ", k);
  return {TensorType(x.dtype, index.dims)};
}

// torch.index_select: x's dims with dim `dim` replaced by index's length.
std::vector<TensorType> infer_index_select(std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType &x = in[0], &index = in[1];
  const size_t d = static_cast<size_t>(axis_in(attrs.get_int("dim"), x));
  check_index_dtype(index, "index");
  KILN_CHECK(index.rank() <= 1, "index must be 1-D (or 0-d), got ", to_string(index));
  Dims out = x.dims;
  if (out.empty()) {
    KILN_CHECK(index.numel() <= 1, "index_select on a 0-d tensor takes one index, got ", to_string(index));
  } else {
    out[d] = index.numel();
  }
  return {TensorType(x.dtype, std::move(out))};
}

// torch.embedding: weight [V, D] rows picked by indices; output indices.dims + [D].
std::vector<TensorType> infer_embedding(std::span<const TensorType> in, const Attrs&) {
  const TensorType &weight = in[0], &indices = in[1];
  KILN_CHECK(weight.rank() == 2, "weight must be 2-D [num_embeddings, dim], got ", to_string(weight));
  KILN_CHECK(is_integral(indices.dtype), "indices must have an integer dtype, got ", dtype_name(indices.dtype));
  Dims out = indices.dims;
  out.push_back(weight.dims[1]);
  return {TensorType(weight.dtype, std::move(out))};
}

}  // namespace

void register_index_ops(OpList& ops) {
  OpDef gather;
  gather.name = "gather";
  gather.inputs = {"x", "index"};
  gather.attrs = {{"dim", AttrKind::int_, std::nullopt}};
  gather.infer = infer_gather;
  gather.aten = {"aten.gather.default"};
  ops.push_back(std::move(gather));

  OpDef index_select;
  index_select.name = "index_select";
  index_select.inputs = {"x", "index"};
  index_select.attrs = {{"dim", AttrKind::int_, std::nullopt}};
  index_select.infer = infer_index_select;
  index_select.aten = {"aten.index_select.default"};
  ops.push_back(std::move(index_select));

  // padding_idx only matters for gradients; accepted so aten.embedding maps directly.
  OpDef embedding;
  embedding.name = "embedding";
  embedding.inputs = {"weight", "indices"};
  embedding.attrs = {{"padding_idx", AttrKind::int_, AttrValue(int64_t{-1})}};
  embedding.infer = infer_embedding;
  embedding.aten = {"aten.embedding.default"};
  ops.push_back(std::move(embedding));
}

}  // namespace kiln::ops_internal
