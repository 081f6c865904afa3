// Reduction op declarations: sum, mean, amax, amin, var over a set of axes, and
// argmax/argmin over one axis (or over all elements). Shape and dtype rules
// follow torch: sum of integers or bool gives i64, mean and var need a
// floating input, arg reductions give i64 indices.
//
// Attributes:
//   sum, mean, amax, amin, var:  dims (ints, default [] = every axis), keepdim (bool, false)
//   var:                         correction (float, default 1.0: the unbiased estimate)
//   argmax, argmin:              dim (int, default 0), keepdim (bool, false),
//                                flatten (bool, default false): when true `dim` is
//                                ignored and the index is into the flattened input
//                                (torch's dim=None); keepdim then keeps every axis as 1.
// A rank-0 input accepts axis 0 or -1 and reduces nothing. amax, amin and the
// arg reductions reject reducing an axis of size 0 (torch does too).
#include <algorithm>

#include "ops/broadcast.h"
#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::ops_internal {

namespace {

enum class ReduceRule { sum, floating, same };

// Dims of a reduction's result: the reduced `axes` (normalized) dropped, or kept as 1.
Dims reduced_dims(const Dims& dims, const std::vector<int64_t>& axes, bool keepdim) {
  Dims out;
  for (size_t i = 0; i < dims.size(); ++i) {
    bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end();
    if (!reduced)
      out.push_back(dims[i]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

// The reduced axes of `type` for a dims attribute; rank-0 inputs reduce nothing.
std::vector<int64_t> reduction_axes(const TensorType& type, const std::vector<int64_t>& dims) {
  std::vector<int64_t> axes = normalize_axes(dims, static_cast<int64_t>(type.rank()));
  if (type.rank() == 0) axes.clear();
  return axes;
}

void check_nonempty(const TensorType& type, const std::vector<int64_t>& axes, const char* what) {
  for (int64_t a : axes)
    KILN_CHECK(type.dims[a] != 0, what, " of an empty axis ", a, " (size 0) has no identity");
}

OpDef axes_reduction(const char* name, ReduceRule rule, std::vector<std::string> aten) {
  OpDef op;
  op.name = name;
  op.inputs = {"x"};
  op.attrs = {{"dims", AttrKind::ints, std::vector<int64_t>{}}, {"keepdim", AttrKind::bool_, false}};
  if (rule == ReduceRule::floating && std::string(name) == "var")
    op.attrs.push_back({"correction", AttrKind::float_, 1.0});
  op.traits = kReduction;
  op.floating_only = rule == ReduceRule::floating;
  op.aten = std::move(aten);
  std::string op_name = name;
  op.infer = [rule, op_name](std::span<const TensorType> in, const Attrs& attrs) {
    const TensorType& x = in[0];
    std::vector<int64_t> axes = reduction_axes(x, attrs.get_ints("dims"));
    DType out = x.dtype;
    if (rule == ReduceRule::sum && !is_floating(x.dtype)) out = DType::i64;
    if (rule == ReduceRule::floating)
      KILN_CHECK(is_floating(x.dtype), op_name, " needs a floating-point input, got ", dtype_name(x.dtype));
    if (op_name == "amax" || op_name == "amin") check_nonempty(x, axes, op_name.c_str());
    return std::vector<TensorType>{TensorType(out, reduced_dims(x.dims, axes, attrs.get_bool("keepdim")))};
  };
  return op;
}

OpDef arg_reduction(const char* name, std::vector<std::string> aten) {
  OpDef op;
  op.name = name;
  op.inputs = {"x"};
  op.attrs = {{"dim", AttrKind::int_, int64_t{0}},
              {"flatten", AttrKind::bool_, false},
              {"keepdim", AttrKind::bool_, false}};
  op.traits = kReduction;
  op.aten = std::move(aten);
  std::string op_name = name;
  op.infer = [op_name](std::span<const TensorType> in, const Attrs& attrs) {
    const TensorType& x = in[0];
    bool keepdim = attrs.get_bool("keepdim");
    std::vector<int64_t> axes;
    if (attrs.get_bool("flatten")) {
      KILN_CHECK(x.numel() != 0, op_name, " of an empty tensor");
      axes = reduction_axes(x, {});
    } else {
      axes = reduction_axes(x, {attrs.get_int("dim")});
      check_nonempty(x, axes, op_name.c_str());
    }
    return std::vector<TensorType>{TensorType(DType::i64, reduced_dims(x.dims, axes, keepdim))};
  };
  return op;
}

// Running sum along one axis (aten.cumsum): same dtype and dims as x; the
// adapter casts x to the result dtype first (integers and bool sum as i64).
OpDef cumsum() {
  OpDef op;
  op.name = "cumsum";
  op.inputs = {"x"};
  op.attrs = {{"dim", AttrKind::int_, std::nullopt}};
  op.aten = {"aten.cumsum.default"};
  op.infer = [](std::span<const TensorType> in, const Attrs& attrs) {
    const TensorType& x = in[0];
    if (x.rank() > 0) normalize_axis(attrs.get_int("dim"), static_cast<int64_t>(x.rank()));
    return std::vector<TensorType>{TensorType(x.dtype, x.dims)};
  };
  return op;
}

}  // namespace

void register_reduction_ops(OpList& ops) {
  ops.push_back(cumsum());
  ops.push_back(axes_reduction("sum", ReduceRule::sum, {"aten.sum.dim_IntList", "aten.sum.default"}));
  ops.push_back(axes_reduction("mean", ReduceRule::floating, {"aten.mean.dim", "aten.mean.default"}));
  ops.push_back(axes_reduction("amax", ReduceRule::same, {"aten.amax.default"}));
  ops.push_back(axes_reduction("amin", ReduceRule::same, {"aten.amin.default"}));
  ops.push_back(axes_reduction("var", ReduceRule::floating, {"aten.var.correction"}));
  ops.push_back(arg_reduction("argmax", {"aten.argmax.default"}));
  ops.push_back(arg_reduction("argmin", {"aten.argmin.default"}));
}

}  // namespace kiln::ops_internal
