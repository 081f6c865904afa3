// Normalization op declarations (kept as whole ops so fused kernels can see
// them): batch_norm (inference), layer_norm, softmax, log_softmax. All need a
// floating input; parameters (mean, var, weight, bias) may have any floating
// dtype and are read in the compute type. Output has the input's dtype and dims.
//
// batch_norm(x, running_mean, running_var, [weight], [bias]); attr eps (1e-5).
//   Channel axis 1, x of rank >= 2, every parameter 1-D of size C. NOTE the
//   input order differs from torch's (weight, bias first) so that weight and
//   bias can be left out (optional trailing inputs): absent weight means 1,
//   absent bias means 0 (to give only a bias, pass a ones weight).
//   Serves aten._native_batch_norm_legit_no_training (its output 0 only).
// layer_norm(x, [weight], [bias]); attrs normalized_rank (int, 1), eps (1e-5).
//   Normalizes over the last normalized_rank dims (biased variance); weight and
//   bias have exactly those dims. Serves aten.native_layer_norm (output 0 only).
// softmax(x), log_softmax(x); attr dim (int, default -1). Computed stably.
#include "ops/broadcast.h"
#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::ops_internal {

namespace {

void check_floating(const TensorType& t, const char* what) {
  KILN_CHECK(is_floating(t.dtype), what, " must be floating-point, got ", dtype_name(t.dtype));
}

OpDef batch_norm() {
  OpDef op;
  op.name = "batch_norm";
  op.floating_only = true;
  op.inputs = {"x", "running_mean", "running_var", "weight", "bias"};
  op.optional_inputs = 2;
  op.attrs = {{"eps", AttrKind::float_, 1e-5}};
  op.aten = {"aten._native_batch_norm_legit_no_training.default"};
  op.infer = [](std::span<const TensorType> in, const Attrs&) {
    static const char* const kNames[] = {"x", "running_mean", "running_var", "weight", "bias"};
    const TensorType& x = in[0];
    check_floating(x, "input x");
    KILN_CHECK(x.rank() >= 2, "input x needs rank >= 2 (batch, channels, ...), got rank ", x.rank());
    for (size_t i = 1; i < in.size(); ++i) {
      check_floating(in[i], kNames[i]);
      KILN_CHECK(in[i].dims == Dims{x.dims[1]}, kNames[i], " must have dims [", x.dims[1], "] (the channels), got [",
                 dims_to_string(in[i].dims), "]");
    }
    return std::vector<TensorType>{TensorType(x.dtype, x.dims)};
  };
  return op;
}

OpDef layer_norm() {
  OpDef op;
  op.name = "layer_norm";
  op.floating_only = true;
  op.inputs = {"x", "weight", "bias"};
  op.optional_inputs = 2;
  op.attrs = {{"eps", AttrKind::float_, 1e-5}, {"normalized_rank", AttrKind::int_, int64_t{1}}};
  op.aten = {"aten.native_layer_norm.default"};
  op.infer = [](std::span<const TensorType> in, const Attrs& attrs) {
    static const char* const kNames[] = {"x", "weight", "bias"};
    const TensorType& x = in[0];
    check_floating(x, "input x");
    int64_t k = attrs.get_int("normalized_rank");
    KILN_CHECK(k >= 1 && k <= static_cast<int64_t>(x.rank()), "normalized_rank ", k, " must be in [1, ", x.rank(),
               "] (the rank of x)");
    Dims normalized(x.dims.end() - k, x.dims.end());
    for (size_t i = 1; i < in.size(); ++i) {
      check_floating(in[i], kNames[i]);
      KILN_CHECK(in[i].dims == normalized, kNames[i], " must have dims [", dims_to_string(normalized),
                 "] (the normalized dims), got [", dims_to_string(in[i].dims), "]");
    }
    return std::vector<TensorType>{TensorType(x.dtype, x.dims)};
  };
  return op;
}

OpDef softmax(const char* name, std::vector<std::string> aten) {
  OpDef op;
  op.name = name;
  op.floating_only = true;
  op.inputs = {"x"};
  op.attrs = {{"dim", AttrKind::int_, int64_t{-1}}};
  op.aten = std::move(aten);
  op.infer = [](std::span<const TensorType> in, const Attrs& attrs) {
    const TensorType& x = in[0];
    check_floating(x, "input x");
    normalize_axis(attrs.get_int("dim"), static_cast<int64_t>(x.rank()));
    return std::vector<TensorType>{TensorType(x.dtype, x.dims)};
  };
  return op;
}

}  // namespace

void register_norm_ops(OpList& ops) {
  ops.push_back(batch_norm());
  ops.push_back(layer_norm());
  ops.push_back(softmax("softmax", {"aten._softmax.default", "aten.softmax.int"}));
  ops.push_back(softmax("log_softmax", {"aten._log_softmax.default", "aten.log_softmax.int"}));
}

}  // namespace kiln::ops_internal
