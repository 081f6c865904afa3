// GraphBuilder: promotion, scalar literals and view-or-copy reshapes.
#include "builder/graph_builder.h"

#include <cmath>
#include <optional>
#include <string_view>
#include <vector>

#include "ir/literal.h"
#include "support/error.h"

namespace kiln {

namespace {
DType scalar_dtype(const Operand& o) {
  if (std::holds_alternative<double>(o)) return DType::f32;  // torch's default float dtype
  if (std::holds_alternative<int64_t>(o)) return DType::i64;
  return DType::boolean;
}

// Whether `dtype` holds the number exactly (NaN counts as held: it stays NaN).
bool holds_exactly(double v, DType dtype) { return std::isnan(v) || round_to(dtype, v) == v; }

// The number a 0-d constant holds: a literal's, or a `full`'s (aten.scalar_tensor); none for other values.
std::optional<double> constant_number(const Value& v) {
  if (v.type.rank() != 0) return std::nullopt;
  if (v.kind == ValueKind::literal) return load_scalar(v.literal_data.data(), v.type.dtype);
  const Node* p = v.producer;
  if (p != nullptr && p->op->name == "full") return p->attrs.get_float("value");
  return std::nullopt;
}

// A 0-d constant of a wider float dtype, holding a number `t` cannot hold. Other 0-d tensors (inputs,
// weights) may live on the device, where torch's kernels round them to `t`.
bool wider_scalar_constant(const Value& v, DType t) {
  if (!is_floating(v.type.dtype) || dtype_size(v.type.dtype) <= dtype_size(t)) return false;
  std::optional<double> n = constant_number(v);
  return n.has_value() && !holds_exactly(*n, t);
}

// Note [Scalars in f16 and bf16]: torch's kernels for an f16/bf16 tensor and
// a number (a Python number, or a 0-d tensor constant: a CPU scalar to them)
// read it at a precision of their own, which differs between devices
// (bench/scalar_precision.py; CPU: torch 2.14.1, CUDA: torch 2.11 on an H200):
//   - mul reads it in f32 (the "opmath" type), computes in f32 and rounds
//     once: x * 0.1 in f16 differed from a rounded literal's answer in a third
//     of its elements;
//   - div: the CPU divides by it in f32; CUDA multiplies by its reciprocal,
//     computed in f32 (in every float dtype; in f64 for f64);
//   - add and sub: the CPU reads it rounded to the dtype, CUDA in f32;
//   - pow reads it rounded on both; comparisons (lt ...) rounded on the CPU,
//     and on CUDA by torch's source (CompareKernels.cu reads the number as the
//     common dtype), not measured there yet (bench/scalar_precision.py's `lt`);
//   - add and sub with an alpha compute a + alpha * b in f32 and round once,
//     the CPU with alpha rounded to the dtype, CUDA with alpha in f32
//     (aten_elementwise.cpp builds that).
// So an op that reads the number in f32, given one the dtype cannot hold, is
// built as cast(op(cast(x, f32), number in f32), dtype), one fused kernel on
// CUDA; numbers the dtype holds (0.5, 8.0, 0.125, small integers) keep the
// plain form (same answer), which the pattern passes expect, and
// recognize_gelu and fuse_attention also see through this one (its literal is
// the number in f32). The graph's EagerDevice (fx_import sets the region's)
// picks the rules.
bool computes_in_f32(std::string_view op, const std::vector<Operand>& operands, DType t, EagerDevice device) {
  bool reads_f32 = op == "mul" || op == "div" || (device == EagerDevice::cuda && (op == "add" || op == "sub"));
  if (!reads_f32 || !is_half(t)) return false;
  for (const Operand& o : operands) {
    if (const auto* v = std::get_if<Value*>(&o); v != nullptr && wider_scalar_constant(**v, t)) return true;
    if (const auto* d = std::get_if<double>(&o); d != nullptr && !holds_exactly(*d, t)) return true;
    if (const auto* i = std::get_if<int64_t>(&o); i != nullptr && !holds_exactly(static_cast<double>(*i), t))
      return true;
  }
  return false;
}

// The number a divisor operand stands for, if it is one a CUDA kernel reads
// as a CPU scalar: a Python number or a wider 0-d constant.
std::optional<double> divisor_number(const Operand& o, DType t) {
  if (const auto* d = std::get_if<double>(&o)) return *d;
  if (const auto* i = std::get_if<int64_t>(&o)) return static_cast<double>(*i);
  if (const auto* b = std::get_if<bool>(&o)) return *b ? 1.0 : 0.0;
  const Value& v = *std::get<Value*>(o);
  return wider_scalar_constant(v, t) ? constant_number(v) : std::nullopt;
}
}  // namespace

std::string GraphBuilder::take_name() {
  std::string n = std::move(next_name_);
  next_name_.clear();
  if (!n.empty() && graph_.find_value(n) != nullptr) n = graph_.fresh_name(n + "_");
  return n;
}

std::vector<Value*> GraphBuilder::op(std::string_view name, std::vector<Value*> inputs, Attrs attrs) {
  Node* node = graph_.add_node(get_op(name), std::move(inputs), std::move(attrs), take_name());
  return node->outputs;
}

Value* GraphBuilder::op1(std::string_view name, std::vector<Value*> inputs, Attrs attrs) {
  return op(name, std::move(inputs), std::move(attrs)).at(0);
}

DType GraphBuilder::result_type(const std::vector<Operand>& operands) const {
  // torch's ResultTypeState: dim tensors, 0-d tensors and wrapped scalars are
  // promoted separately; a lower-priority group only raises the category.
  std::optional<DType> dim, zero, wrapped;
  auto merge = [](std::optional<DType>& slot, DType d) { slot = slot ? promote_types(*slot, d) : d; };
  for (const Operand& o : operands) {
    if (const auto* v = std::get_if<Value*>(&o)) {
      merge((*v)->type.rank() == 0 ? zero : dim, (*v)->type.dtype);
    } else {
      merge(wrapped, scalar_dtype(o));
    }
  }
  auto combine = [](std::optional<DType> higher, std::optional<DType> lower) -> std::optional<DType> {
    if (!higher) return lower;
    if (!lower || is_floating(*higher)) return higher;
    if (is_bool(*higher) || is_floating(*lower)) return promote_types(*higher, *lower);
    return higher;
  };
  return combine(dim, combine(zero, wrapped)).value_or(DType::f32);
}

Value* GraphBuilder::cast(Value* v, DType dtype) {
  if (v->type.dtype == dtype) return v;
  Attrs a;
  a.set("dtype", dtype);
  return op1("cast", {v}, std::move(a));
}

Value* GraphBuilder::scalar(double v, DType dtype) { return graph_.add_scalar(v, dtype); }

Value* GraphBuilder::to_value(const Operand& operand, DType dtype) {
  if (const auto* v = std::get_if<Value*>(&operand)) return cast(*v, dtype);
  if (const auto* d = std::get_if<double>(&operand)) return scalar(*d, dtype);
  if (const auto* i = std::get_if<int64_t>(&operand)) return scalar(static_cast<double>(*i), dtype);
  return scalar(std::get<bool>(operand) ? 1.0 : 0.0, dtype);
}

Value* GraphBuilder::elementwise(std::string_view name, std::vector<Operand> operands) {
  const OpDef& def = get_op(name);
  KILN_CHECK(def.elementwise.has_value(), "'", name, "' is not an elementwise op");
  const ElementwiseInfo& info = *def.elementwise;
  KILN_CHECK(static_cast<int>(operands.size()) == info.arity, "'", name, "' takes ", info.arity, " operands, got ",
             operands.size());
  if (name == "div" && eager_device_ == EagerDevice::cuda) {
    // CUDA's x / number is x * (1 / number), the reciprocal in f32 (f64 for f64): Note [Scalars in f16 and bf16].
    DType t = result_type(operands);
    if (!is_floating(t)) t = DType::f32;
    if (std::optional<double> d = divisor_number(operands[1], t)) {
      double reciprocal = t == DType::f64 ? 1.0 / *d : static_cast<double>(1.0f / static_cast<float>(*d));
      return elementwise("mul", {operands[0], reciprocal});
    }
  }
  std::vector<Value*> inputs;
  std::string node_name = take_name();
  if (info.kind == ElementwiseKind::select) {
    // where(cond, a, b): the condition is bool; a and b promote together.
    DType t = result_type({operands[1], operands[2]});
    inputs = {to_value(operands[0], DType::boolean), to_value(operands[1], t), to_value(operands[2], t)};
  } else if (info.kind == ElementwiseKind::logical) {
    for (const Operand& o : operands) inputs.push_back(to_value(o, DType::boolean));
  } else {
    DType t = result_type(operands);
    if (info.kind == ElementwiseKind::floating && !is_floating(t)) t = DType::f32;
    if (computes_in_f32(name, operands, t, eager_device_)) {  // Note [Scalars in f16 and bf16]
      for (const Operand& o : operands) inputs.push_back(to_value(o, DType::f32));
      Value* wide = op1(name, std::move(inputs));
      set_next_name(node_name);
      return cast(wide, t);
    }
    for (const Operand& o : operands) inputs.push_back(to_value(o, t));
  }
  set_next_name(node_name);
  return op1(name, std::move(inputs));
}

Value* GraphBuilder::reshape(Value* v, const Dims& shape) {
  Attrs a;
  a.set("shape", shape);
  std::string name = take_name();
  try {
    // Inference only: can reshape be a view of v's strides?
    std::vector<TensorType> in{v->type};
    infer_types(get_op("reshape"), in, complete_attrs(get_op("reshape"), a), "reshape");
  } catch (const Error&) {
    v = op1("contiguous", {v});
  }
  set_next_name(name);
  return op1("reshape", {v}, std::move(a));
}

Value* GraphBuilder::permute(Value* v, const std::vector<int64_t>& dims) {
  Attrs a;
  a.set("dims", dims);
  return op1("permute", {v}, std::move(a));
}

}  // namespace kiln
