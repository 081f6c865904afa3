// Creation op declarations: full and arange take no tensor inputs; their
// outputs come from attributes alone (trait kCreation).
#include <cmath>
#include <string>

#include "ops/fill_value.h"
#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::ops_internal {

namespace {

std::vector<TensorType> infer_full(std::span<const TensorType>, const Attrs& attrs) {
  const std::vector<int64_t>& shape = attrs.get_ints("shape");
  for (int64_t s : shape) KILN_CHECK(s >= 0, "shape [", dims_to_string(shape), "] has a negative size ", s);
  check_fill_value(attrs.get_float("value"), attrs.get_dtype("dtype"), "value");
  return {TensorType(attrs.get_dtype("dtype"), shape)};
}

// torch.arange: length ceil((end - start) / step), values start + i * step.
std::vector<TensorType> infer_arange(std::span<const TensorType>, const Attrs& attrs) {
  const double start = attrs.get_float("start"), end = attrs.get_float("end"), step = attrs.get_float("step");
  const DType dtype = attrs.get_dtype("dtype");
  KILN_CHECK(dtype != DType::boolean, "arange does not support dtype bool");
  KILN_CHECK(std::isfinite(start) && std::isfinite(end), "arange bounds must be finite, got start ", start,
             " and end ", end);
  KILN_CHECK(step != 0 && std::isfinite(step), "arange step must be finite and non-zero, got ", step);
  KILN_CHECK((step > 0 && end >= start) || (step < 0 && end <= start), "arange bounds start ", start, " and end ",
             end, " are inconsistent with the sign of step ", step);
  const double length = std::ceil((end - start) / step);
  KILN_CHECK(length < 9.0e18, "arange length ", length, " is too large");
  return {TensorType(dtype, {static_cast<int64_t>(length)})};
}

}  // namespace

void register_creation_ops(OpList& ops) {
  // value converts to dtype like a C cast (integers truncate and must fit; bool is value != 0).
  OpDef full;
  full.name = "full";
  full.attrs = {{"shape", AttrKind::ints, std::nullopt},
                {"value", AttrKind::float_, std::nullopt},
                {"dtype", AttrKind::dtype, AttrValue(DType::f32)}};
  full.traits = kCreation;
  full.infer = infer_full;
  full.aten = {"aten.full.default"};
  ops.push_back(std::move(full));

  OpDef arange;
  arange.name = "arange";
  arange.attrs = {{"start", AttrKind::float_, AttrValue(0.0)},
                  {"end", AttrKind::float_, std::nullopt},
                  {"step", AttrKind::float_, AttrValue(1.0)},
                  {"dtype", AttrKind::dtype, AttrValue(DType::i64)}};
  arange.traits = kCreation;
  arange.infer = infer_arange;
  arange.aten = {"aten.arange.default", "aten.arange.start", "aten.arange.start_step"};
  ops.push_back(std::move(arange));
}

}  // namespace kiln::ops_internal
