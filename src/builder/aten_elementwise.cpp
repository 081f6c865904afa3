// ATen adapters for elementwise ops: arithmetic with alpha, comparisons,
// unary math, special-value tests, clamps, where, casts and identities.
#include <limits>
#include <utility>

#include "builder/aten_call.h"
#include "ir/literal.h"
#include "support/error.h"

namespace kiln::aten_internal {

namespace {

// self <op> other, with torch's `alpha` scaling the second operand where the overload has it;
// `reversed` (rsub) computes other <op> alpha * self.
AtenAdapter binary(const char* op, bool has_alpha = false, bool reversed = false) {
  return [op, has_alpha, reversed](AtenCall& c) {
    Operand first = c.operand("self"), second = c.operand("other");
    if (reversed) std::swap(first, second);
    if (has_alpha && c.has("alpha") && c.number("alpha") != 1.0) {
      DType t = c.b.result_type({first, second});
      if (is_half(t)) {
        // torch computes a + alpha * b in f32 and rounds once (two roundings differ). Its CPU kernels
        // read alpha and a number operand rounded to t, its CUDA kernels in f32 (Note [Scalars in f16 and bf16]).
        bool cuda = c.b.eager_device() == EagerDevice::cuda;
        auto wide = [&](const Operand& o) {
          return cuda && !std::holds_alternative<Value*>(o) ? c.b.to_value(o, DType::f32)
                                                            : c.b.cast(c.b.to_value(o, t), DType::f32);
        };
        double alpha = cuda ? c.number("alpha") : round_to(t, c.number("alpha"));
        Value* scaled = c.b.elementwise("mul", {wide(second), c.b.scalar(alpha, DType::f32)});
        return one(c.b.cast(c.b.elementwise(op, {wide(first), scaled}), t));
      }
      second = c.b.elementwise("mul", {second, c.b.scalar(c.number("alpha"), t)});
    }
    return one(c.b.elementwise(op, {first, second}));
  };
}

AtenAdapter unary(const char* op) {
  return [op](AtenCall& c) { return one(c.b.elementwise(op, {c.operand("self")})); };
}

// clamp(self, min, max) where either bound may be absent.
std::vector<Value*> clamp(AtenCall& c, const char* lo_name, const char* hi_name) {
  Operand self = c.operand("self");
  bool lo = c.has(lo_name), hi = c.has(hi_name);
  if (!lo && !hi) c.unsupported("clamp needs min or max");
  std::vector<Operand> all{self};
  if (lo) all.push_back(c.operand(lo_name));
  if (hi) all.push_back(c.operand(hi_name));
  DType t = c.b.result_type(all);
  Value* x = c.b.to_value(self, t);
  if (lo && hi) return one(c.b.elementwise("clamp", {x, c.b.to_value(c.operand(lo_name), t), c.b.to_value(c.operand(hi_name), t)}));
  if (lo) return one(c.b.elementwise("maximum", {x, c.b.to_value(c.operand(lo_name), t)}));
  return one(c.b.elementwise("minimum", {x, c.b.to_value(c.operand(hi_name), t)}));
}

// x ** e for an integer tensor, by squaring (wraps on overflow like torch).
Value* int_pow(AtenCall& c, Value* x, int64_t e) {
  if (e == 0) {
    Attrs a;
    a.set("shape", x->type.dims);
    a.set("value", 1.0);
    a.set("dtype", x->type.dtype);
    return c.b.op1("full", {}, std::move(a));
  }
  Value* result = nullptr;
  for (Value* base = x; e > 0; e >>= 1) {
    if (e & 1) result = result == nullptr ? base : c.b.elementwise("mul", {result, base});
    if (e > 1) base = c.b.elementwise("mul", {base, base});
  }
  return result;
}

// isinf/isnan/isfinite as comparisons, so that they need no kernel of their own:
// isinf(x) = |x| == inf, isnan(x) = x != x, isfinite(x) = |x| < inf (false for NaN).
// An integer or bool tensor holds neither infinities nor NaN: its answer is a constant.
AtenAdapter special_value_test(bool integer_answer, Value* (*test)(GraphBuilder& b, Value* x)) {
  return [integer_answer, test](AtenCall& c) {
    Value* x = c.tensor("self");
    if (is_floating(x->type.dtype)) return one(test(c.b, x));
    Attrs a = attrs({{"shape", x->type.dims}, {"value", integer_answer ? 1.0 : 0.0}, {"dtype", DType::boolean}});
    return one(c.b.op1("full", {}, std::move(a)));
  };
}

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

void register_elementwise_adapters(AdapterMap& m) {
  for (const char* o : {"add", "sub"}) {
    m[std::string("aten.") + o + ".Tensor"] = binary(o, true);
    m[std::string("aten.") + o + ".Scalar"] = binary(o, true);
  }
  m["aten.rsub.Scalar"] = binary("sub", true, true);
  m["aten.rsub.Tensor"] = binary("sub", true, true);
  for (const char* o : {"mul", "div"}) {
    m[std::string("aten.") + o + ".Tensor"] = binary(o);
    m[std::string("aten.") + o + ".Scalar"] = binary(o);
  }
  m["aten.div.Tensor_mode"] = [](AtenCall& c) {
    if (c.has("rounding_mode")) c.unsupported("rounding_mode '" + c.string_or("rounding_mode", "") + "' is not supported");
    return one(c.b.elementwise("div", {c.operand("self"), c.operand("other")}));
  };
  for (const char* o : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    m[std::string("aten.") + o + ".Tensor"] = binary(o);
    m[std::string("aten.") + o + ".Scalar"] = binary(o);
  }
  // fmod: floats any divisor; integers only a nonzero constant (torch raises on an integer 0).
  auto fmod = [as_fmod = binary("fmod")](AtenCall& c) {
    Operand self = c.operand("self"), other = c.operand("other");
    if (!is_floating(c.b.result_type({self, other}))) {
      const auto* d = std::get_if<int64_t>(&other);
      if (d == nullptr || *d == 0) c.unsupported("integer fmod needs a nonzero constant divisor");
    }
    return as_fmod(c);
  };
  m["aten.fmod.Scalar"] = fmod;
  m["aten.fmod.Tensor"] = fmod;
  m["aten.maximum.default"] = binary("maximum");
  m["aten.minimum.default"] = binary("minimum");
  m["aten.logical_and.default"] = binary("logical_and");
  m["aten.logical_or.default"] = binary("logical_or");
  m["aten.logical_not.default"] = unary("logical_not");
  // Bitwise ops on bools (attention masks) are the logical ops; integer bit math is not lowered.
  for (auto [o, logical] : {std::pair{"bitwise_and", "logical_and"}, {"bitwise_or", "logical_or"}}) {
    AtenAdapter as_logical = binary(logical);
    m[std::string("aten.") + o + ".Tensor"] = [as_logical, o](AtenCall& c) {
      for (const char* name : {"self", "other"})
        if (c.tensor(name)->type.dtype != DType::boolean)
          c.unsupported(str_cat(o, " on ", dtype_name(c.tensor(name)->type.dtype), " (kiln lowers it for bool only)"));
      return as_logical(c);
    };
  }
  m["aten.bitwise_not.default"] = [](AtenCall& c) {
    Value* self = c.tensor("self");
    if (self->type.dtype != DType::boolean)
      c.unsupported(str_cat("bitwise_not on ", dtype_name(self->type.dtype), " (kiln lowers it for bool only)"));
    return one(c.b.elementwise("logical_not", {self}));
  };
  m["aten.pow.Tensor_Scalar"] = [](AtenCall& c) {
    Operand self = c.operand("self"), exponent = c.operand("exponent");
    DType t = c.b.result_type({self, exponent});
    if (is_floating(t)) return one(c.b.elementwise("pow", {self, exponent}));
    // Integer pow stays integer in torch: exact repeated multiplication for a small constant exponent.
    const auto* e = std::get_if<int64_t>(&exponent);
    if (e == nullptr || !std::holds_alternative<Value*>(self) || *e < 0 || *e > 64)
      c.unsupported("integer pow needs a tensor base and a constant exponent in [0, 64]");
    return one(int_pow(c, c.b.cast(std::get<Value*>(self), t), *e));
  };
  m["aten.pow.Tensor_Tensor"] = m["aten.pow.Tensor_Scalar"];
  m["aten.pow.Scalar"] = m["aten.pow.Tensor_Scalar"];
  for (const char* o : {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh", "sigmoid",
                        "relu", "silu", "erf"})
    m[std::string("aten.") + o + ".default"] = unary(o);
  m["aten.isinf.default"] = special_value_test(
      false, [](GraphBuilder& b, Value* x) { return b.elementwise("eq", {b.elementwise("abs", {x}), kInf}); });
  m["aten.isnan.default"] =
      special_value_test(false, [](GraphBuilder& b, Value* x) { return b.elementwise("ne", {x, x}); });
  m["aten.isfinite.default"] = special_value_test(
      true, [](GraphBuilder& b, Value* x) { return b.elementwise("lt", {b.elementwise("abs", {x}), kInf}); });
  m["aten.gelu.default"] = [](AtenCall& c) {
    std::string approx = c.string_or("approximate", "none");
    if (approx != "none" && approx != "tanh") c.unsupported("gelu approximate='" + approx + "'");
    return one(c.b.elementwise(approx == "tanh" ? "gelu_tanh" : "gelu", {c.operand("self")}));
  };
  m["aten.clamp.default"] = [](AtenCall& c) { return clamp(c, "min", "max"); };
  m["aten.clamp.Tensor"] = m["aten.clamp.default"];
  m["aten.clamp_min.default"] = [](AtenCall& c) { return clamp(c, "min", ""); };
  m["aten.clamp_max.default"] = [](AtenCall& c) { return clamp(c, "", "max"); };
  m["aten.hardtanh.default"] = [](AtenCall& c) { return clamp(c, "min_val", "max_val"); };
  m["aten.where.self"] = [](AtenCall& c) {
    return one(c.b.elementwise("where", {c.operand("condition"), c.operand("self"), c.operand("other")}));
  };
  m["aten._to_copy.default"] = [](AtenCall& c) {
    Value* self = c.tensor("self");
    // Device moves never reach here: the partitioner keeps nodes whose tensors
    // change device in PyTorch.
    if (c.flag_or("pin_memory", false)) c.unsupported("_to_copy with pin_memory");
    DType t = c.dtype("dtype").value_or(self->type.dtype);
    Value* out = c.b.cast(self, t);
    return one(out == self ? c.b.op1("contiguous", {self}) : out);
  };
  m["aten.clone.default"] = [](AtenCall& c) { return one(c.b.op1("contiguous", {c.tensor("self")})); };
  for (const char* o : {"aten.alias.default", "aten.detach.default", "aten.lift_fresh_copy.default"})
    m[o] = [](AtenCall& c) { return one(c.tensor("self")); };
}

}  // namespace kiln::aten_internal
