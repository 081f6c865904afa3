// Shape op declarations. Views (reshape, permute, expand, slice, select,
// squeeze, unsqueeze, as_strided) alias input 0: their inference is view_layout, and the
// runtime binds them (Note [Views are resolved by the runtime]). Copies
// (contiguous, copies, concat, constant_pad) produce contiguous outputs;
// `copies` is several contiguous copies in one node (pair_copies makes it, so
// a backend can move them in one launch).
#include <cstdint>
#include <limits>
#include <string>

#include "ops/broadcast.h"
#include "ops/fill_value.h"
#include "ops/op_registry.h"
#include "ops/view_offset.h"
#include "support/error.h"

namespace kiln::ops_internal {

namespace {

using Ints = std::vector<int64_t>;

OpDef view_op(const char* name, std::vector<AttrSpec> attrs, std::vector<std::string> aten) {
  OpDef op;
  op.name = name;
  op.inputs = {"x"};
  op.attrs = std::move(attrs);
  op.traits = kView;
  op.aten = std::move(aten);
  std::string n = name;
  op.infer = [n](std::span<const TensorType> in, const Attrs& attrs) {
    return std::vector<TensorType>{view_layout(n, in[0], attrs).type};
  };
  return op;
}

std::vector<TensorType> infer_contiguous(std::span<const TensorType> in, const Attrs&) {
  return {TensorType(in[0].dtype, in[0].dims)};
}

std::vector<TensorType> infer_copies(std::span<const TensorType> in, const Attrs&) {
  std::vector<TensorType> out;
  for (const TensorType& t : in) out.emplace_back(t.dtype, t.dims);
  return out;
}

// torch.cat: same dtype and rank, equal dims except along `dim`. A 1-D empty
// input ([0]) is skipped whatever the others' rank (torch's legacy rule).
std::vector<TensorType> infer_concat(std::span<const TensorType> in, const Attrs& attrs) {
  auto legacy_empty = [](const TensorType& t) { return t.rank() == 1 && t.dims[0] == 0; };
  size_t ref = 0;
  while (ref + 1 < in.size() && legacy_empty(in[ref])) ++ref;
  const TensorType& first = in[ref];
  KILN_CHECK(first.rank() > 0, "cannot concatenate rank-0 tensors (input ", ref, " is ", to_string(first), ")");
  const int64_t rank = static_cast<int64_t>(first.rank());
  int64_t dim = attrs.get_int("dim");
  KILN_CHECK(dim >= -rank && dim < rank, "dim ", dim, " is out of range for rank ", rank);
  const size_t d = static_cast<size_t>(dim < 0 ? dim + rank : dim);
  Dims out = first.dims;
  out[d] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    KILN_CHECK(in[i].dtype == first.dtype, "input ", i, " is ", dtype_name(in[i].dtype), " but input ", ref,
               " is ", dtype_name(first.dtype), " (cast first)");
    if (legacy_empty(in[i]) && in[i].rank() != first.rank()) continue;
    KILN_CHECK(in[i].rank() == first.rank(), "input ", i, " is ", to_string(in[i]), " but input ", ref, " is ",
               to_string(first), ": ranks differ");
    for (size_t k = 0; k < first.rank(); ++k)
      KILN_CHECK(k == d || in[i].dims[k] == first.dims[k], "input ", i, " is ", to_string(in[i]), " but input ",
                 ref, " is ", to_string(first), ": sizes differ in dim ", k, " (concatenating along dim ", d, ")");
    out[d] += in[i].dims[d];
  }
  return {TensorType(first.dtype, std::move(out))};
}

// torch.constant_pad_nd: pad = [last_lo, last_hi, prev_lo, prev_hi, ...];
// negative pads crop.
std::vector<TensorType> infer_constant_pad(std::span<const TensorType> in, const Attrs& attrs) {
  const Ints& pad = attrs.get_ints("pad");
  const TensorType& x = in[0];
  KILN_CHECK(pad.size() % 2 == 0, "pad [", dims_to_string(pad), "] must have an even length (pairs per dim)");
  KILN_CHECK(pad.size() / 2 <= x.rank(), "pad [", dims_to_string(pad), "] pads ", pad.size() / 2, " dims but ",
             to_string(x), " has only ", x.rank());
  Dims out = x.dims;
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    size_t d = x.rank() - 1 - k;
    out[d] = x.dims[d] + pad[2 * k] + pad[2 * k + 1];
    KILN_CHECK(out[d] >= 0, "pad [", dims_to_string(pad), "] makes dim ", d, " of ", to_string(x),
               " negative (", out[d], ")");
  }
  check_fill_value(attrs.get_float("value"), x.dtype, "value");
  return {TensorType(x.dtype, std::move(out))};
}

}  // namespace

void register_shape_ops(OpList& ops) {
  const AttrValue kNoEnd = std::numeric_limits<int64_t>::max();
  ops.push_back(view_op("reshape", {{"shape", AttrKind::ints, std::nullopt}},
                        {"aten.view.default", "aten._unsafe_view.default", "aten.reshape.default"}));
  ops.push_back(view_op("permute", {{"dims", AttrKind::ints, std::nullopt}}, {"aten.permute.default"}));
  ops.push_back(view_op("expand", {{"shape", AttrKind::ints, std::nullopt}}, {"aten.expand.default"}));
  ops.push_back(view_op("slice",
                        {{"dim", AttrKind::int_, AttrValue(int64_t{0})},
                         {"start", AttrKind::int_, AttrValue(int64_t{0})},
                         {"end", AttrKind::int_, kNoEnd},
                         {"step", AttrKind::int_, AttrValue(int64_t{1})}},
                        {"aten.slice.Tensor"}));
  ops.push_back(view_op("select",
                        {{"dim", AttrKind::int_, std::nullopt}, {"index", AttrKind::int_, std::nullopt}},
                        {"aten.select.int"}));
  // dims: the axes to drop when they have size 1; empty means every size-1 axis.
  ops.push_back(view_op("squeeze", {{"dims", AttrKind::ints, AttrValue(Ints{})}},
                        {"aten.squeeze.default", "aten.squeeze.dim", "aten.squeeze.dims"}));
  ops.push_back(view_op("unsqueeze", {{"dim", AttrKind::int_, std::nullopt}}, {"aten.unsqueeze.default"}));
  // Strides (in the input's element space) from an element offset: built by passes (read_through_copies),
  // not imported (aten.as_strided counts from the storage, not from its input's first element).
  ops.push_back(view_op("as_strided",
                        {{"shape", AttrKind::ints, std::nullopt},
                         {"strides", AttrKind::ints, std::nullopt},
                         {"offset", AttrKind::int_, AttrValue(int64_t{0})}},
                        {}));

  OpDef contiguous;
  contiguous.name = "contiguous";
  contiguous.inputs = {"x"};
  contiguous.infer = infer_contiguous;
  contiguous.aten = {"aten.clone.default", "aten.contiguous.default"};
  ops.push_back(std::move(contiguous));

  OpDef copies;
  copies.name = "copies";
  copies.inputs = {"xs"};
  copies.variadic = true;
  copies.num_outputs = 0;  // one per input
  copies.infer = infer_copies;
  ops.push_back(std::move(copies));

  OpDef concat;
  concat.name = "concat";
  concat.inputs = {"xs"};
  concat.variadic = true;
  concat.attrs = {{"dim", AttrKind::int_, AttrValue(int64_t{0})}};
  concat.infer = infer_concat;
  concat.aten = {"aten.cat.default"};
  ops.push_back(std::move(concat));

  OpDef pad;
  pad.name = "constant_pad";
  pad.inputs = {"x"};
  pad.attrs = {{"pad", AttrKind::ints, std::nullopt}, {"value", AttrKind::float_, AttrValue(0.0)}};
  pad.infer = infer_constant_pad;
  pad.aten = {"aten.constant_pad_nd.default"};
  ops.push_back(std::move(pad));
}

}  // namespace kiln::ops_internal
