"""ATen op cases: elementwise arithmetic, comparisons, logical ops, unary math, clamps, where and casts."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: F401 - used by some families

from aten_cases.common import *  # noqa: F401,F403 - the case vocabulary: case, randn, dtypes, ...

# ---- elementwise arithmetic -------------------------------------------------

case("add_bcast_alpha", lambda x, y: torch.add(x, y, alpha=2), lambda g: (randn(g, 3, 5, 7), randn(g, 5, 7)), "aten.add.Tensor")
case("add_f16", lambda x, y: x + y, lambda g: (randn(g, 3, 5, 7, dtype=f16), randn(g, 7, dtype=f16)), "aten.add.Tensor")
case("add_bf16", lambda x, y: x + y, lambda g: (randn(g, 3, 1, 7, dtype=bf16), randn(g, 5, 1, dtype=bf16)), "aten.add.Tensor")
case("add_f64_transposed", lambda x, y: x + y, lambda g: (transposed(randn(g, 5, 7, dtype=f64)), randn(g, 5, 7, dtype=f64)), "aten.add.Tensor")
case("add_i64_alpha", lambda x, y: torch.add(x, y, alpha=3), lambda g: (randint(g, 3, 5), randint(g, 3, 5)), "aten.add.Tensor")
case("add_i32_i64_promote", lambda x, y: x + y, lambda g: (randint(g, 4, 5, dtype=i32), randint(g, 5)), "aten.add.Tensor")
case("add_i32_f32_promote", lambda x, y: x + y, lambda g: (randint(g, 4, 5, dtype=i32), randn(g, 4, 5)), "aten.add.Tensor")
case("add_f16_f32_promote", lambda x, y: x + y, lambda g: (randn(g, 4, 5, dtype=f16), randn(g, 5)), "aten.add.Tensor")
case("add_f16_0d_f32", lambda x, y: x + y, lambda g: (randn(g, 4, 5, dtype=f16), randn(g, dtype=f32)), "aten.add.Tensor", tol=f16)
case("add_scalar_float", lambda x: x + 2.5, lambda g: (strided(randn(g, 3, 5, 7)),), "aten.add.Tensor")
case("add_i32_scalar_float", lambda x: x + 1.5, lambda g: (randint(g, 3, 5, dtype=i32),), "aten.add.Tensor")
case("add_bool_bool", lambda x, y: x + y, lambda g: (randbool(g, 3, 5), randbool(g, 3, 5)), "aten.add.Tensor")
case("add_Scalar_direct", lambda x: aten.add.Scalar(x, 3, alpha=2), lambda g: (randint(g, 3, 5, dtype=i32),), "aten.add.Scalar", direct=True)
case("sub_bcast_alpha", lambda x, y: torch.sub(x, y, alpha=0.5), lambda g: (randn(g, 3, 5, 7), randn(g, 3, 1, 7)), "aten.sub.Tensor")
case("sub_i64_sliced", lambda x, y: x - y, lambda g: (strided(randint(g, 4, 6)), randint(g, 6)), "aten.sub.Tensor")
case("sub_bf16", lambda x, y: x - y, lambda g: (randn(g, 5, 7, dtype=bf16), randn(g, 5, 7, dtype=bf16)), "aten.sub.Tensor")
case("sub_Scalar_direct", lambda x: aten.sub.Scalar(x, 1.5), lambda g: (randn(g, 3, 5),), "aten.sub.Scalar", direct=True)
case("rsub_scalar", lambda x: 2 - x, lambda g: (randn(g, 3, 5, 7),), "aten.sub.Tensor")
case("rsub_Scalar_direct", lambda x: aten.rsub.Scalar(x, 2, alpha=3), lambda g: (randn(g, 3, 5),), "aten.rsub.Scalar", direct=True)
case("rsub_Tensor_direct", lambda x, y: aten.rsub.Tensor(x, y, alpha=2), lambda g: (randn(g, 3, 5), randn(g, 5)), "aten.rsub.Tensor", direct=True)
case("mul_bcast", lambda x, y: x * y, lambda g: (randn(g, 3, 5, 7), randn(g, 3, 5, 1)), "aten.mul.Tensor")
case("mul_f16_transposed", lambda x, y: x * y, lambda g: (transposed(randn(g, 5, 7, dtype=f16)), randn(g, 7, dtype=f16)), "aten.mul.Tensor")
case("mul_i32", lambda x, y: x * y, lambda g: (randint(g, 3, 5, dtype=i32), randint(g, 3, 5, dtype=i32)), "aten.mul.Tensor")
case("mul_scalar_f64", lambda x: x * 0.3, lambda g: (randn(g, 3, 5, dtype=f64),), "aten.mul.Tensor")
case("mul_bool_f32", lambda m, x: m * x, lambda g: (randbool(g, 5, 7), randn(g, 5, 7)), "aten.mul.Tensor")
case("mul_Scalar_direct", lambda x: aten.mul.Scalar(x, 3), lambda g: (randint(g, 3, 5),), "aten.mul.Scalar", direct=True)
case("div_bcast", lambda x, y: x / y, lambda g: (randn(g, 3, 5, 7), positive(g, 7)), "aten.div.Tensor")
case("div_int_true", lambda x, y: x / y, lambda g: (randint(g, 3, 5), randint(g, 3, 5, lo=1, hi=4)), "aten.div.Tensor")
case("div_bf16_scalar", lambda x: x / 3.0, lambda g: (randn(g, 5, 7, dtype=bf16),), "aten.div.Tensor")
case("div_f64_transposed", lambda x, y: x / y, lambda g: (transposed(randn(g, 6, 5, dtype=f64)), positive(g, 6, 5, dtype=f64)), "aten.div.Tensor")
case("div_Scalar_direct", lambda x: aten.div.Scalar(x, 4), lambda g: (randint(g, 3, 5),), "aten.div.Scalar", direct=True)
case("div_mode_none_direct", lambda x, y: aten.div.Tensor_mode(x, y, rounding_mode=None), lambda g: (randn(g, 3, 5), positive(g, 5)), "aten.div.Tensor_mode", direct=True)
case(
    "div_mode_floor_falls_back",
    lambda x, y: aten.div.Tensor_mode(x, y, rounding_mode="floor"),
    lambda g: (randn(g, 3, 5), positive(g, 5)),
    (),
    fallback={"aten.div.Tensor_mode": "rounding_mode"},
    direct=True,
)

# ---- comparisons -------------------------------------------------------------

for op in ("eq", "ne", "lt", "le", "gt", "ge"):
    fn = getattr(torch, op)
    case(f"{op}_f32_bcast", lambda x, y, fn=fn: fn(x, y), lambda g: (randint(g, 3, 5, 7, lo=-2, hi=3).float(), randint(g, 5, 1, lo=-2, hi=3).float()), f"aten.{op}.Tensor")
    case(f"{op}_i64_scalar", lambda x, fn=fn: fn(x, 1), lambda g: (randint(g, 4, 6, lo=-2, hi=3),), f"aten.{op}.Scalar")
    case(f"{op}_i32_f32_transposed", lambda x, y, fn=fn: fn(x, y), lambda g: (randint(g, 5, 4, lo=-2, hi=3, dtype=i32), transposed(randint(g, 5, 4, lo=-2, hi=3).float())), f"aten.{op}.Tensor")
case("eq_bool", lambda x, y: x == y, lambda g: (randbool(g, 3, 5), randbool(g, 5)), "aten.eq.Tensor")
case("lt_f16_scalar_float", lambda x: x < 0.25, lambda g: (randn(g, 3, 5, 7, dtype=f16),), "aten.lt.Scalar")
case("ge_bf16", lambda x, y: x >= y, lambda g: (randn(g, 5, 7, dtype=bf16), randn(g, 5, 7, dtype=bf16)), "aten.ge.Tensor")
case("ne_nan", lambda x: x != x, lambda g: (torch.tensor([1.0, float("nan"), -0.0, float("inf")]),), "aten.ne.Tensor")

# ---- min/max, logical, pow ----------------------------------------------------

case("maximum_bcast", lambda x, y: torch.maximum(x, y), lambda g: (randn(g, 3, 5, 7), randn(g, 7)), "aten.maximum.default")
case("maximum_nan", lambda x, y: torch.maximum(x, y), lambda g: (torch.tensor([1.0, float("nan"), 2.0, float("nan")]), torch.tensor([float("nan"), 0.0, 3.0, float("nan")])), "aten.maximum.default")
case("maximum_i32_i64", lambda x, y: torch.maximum(x, y), lambda g: (randint(g, 4, 5, dtype=i32), randint(g, 4, 5)), "aten.maximum.default")
case("minimum_f16_transposed", lambda x, y: torch.minimum(x, y), lambda g: (transposed(randn(g, 5, 6, dtype=f16)), randn(g, 5, 6, dtype=f16)), "aten.minimum.default")
case("minimum_nan", lambda x, y: torch.minimum(x, y), lambda g: (torch.tensor([1.0, float("nan"), 2.0]), torch.tensor([float("nan"), 0.0, 3.0])), "aten.minimum.default")
case("logical_and_bool", lambda x, y: torch.logical_and(x, y), lambda g: (randbool(g, 3, 5, 7), randbool(g, 5, 7)), "aten.logical_and.default")
case("logical_and_f32", lambda x, y: torch.logical_and(x, y), lambda g: (randint(g, 4, 5, lo=-1, hi=2).float(), randint(g, 4, 5, lo=-1, hi=2).float()), "aten.logical_and.default")
case("logical_or_bool_sliced", lambda x, y: torch.logical_or(x, y), lambda g: (strided(randbool(g, 4, 6)), randbool(g, 4, 6)), "aten.logical_or.default")
case("logical_or_i64", lambda x, y: torch.logical_or(x, y), lambda g: (randint(g, 4, 5, lo=-1, hi=2), randint(g, 5, lo=-1, hi=2)), "aten.logical_or.default")
case("logical_not_bool", lambda x: torch.logical_not(x), lambda g: (randbool(g, 3, 5, 7),), "aten.logical_not.default")
case("logical_not_f32", lambda x: torch.logical_not(x), lambda g: (randint(g, 4, 5, lo=-1, hi=2).float(),), "aten.logical_not.default")
case("pow_square", lambda x: x**2, lambda g: (randn(g, 3, 5, 7),), "aten.pow.Tensor_Scalar")
case("pow_half", lambda x: x**0.5, lambda g: (positive(g, 3, 5),), "aten.pow.Tensor_Scalar")
case("pow_f16_cube", lambda x: x**3, lambda g: (randn(g, 5, 7, dtype=f16),), "aten.pow.Tensor_Scalar")
case("pow_i64_square", lambda x: x**2, lambda g: (randint(g, 4, 5),), "aten.pow.Tensor_Scalar")
case("pow_i32_cube_direct", lambda x: aten.pow.Tensor_Scalar(x, 5), lambda g: (randint(g, 4, 5, dtype=i32),), "aten.pow.Tensor_Scalar", direct=True)
case("pow_i64_one_direct", lambda x: aten.pow.Tensor_Scalar(x, 1), lambda g: (randint(g, 4, 5),), "aten.pow.Tensor_Scalar", direct=True)
case("alias_as_output_direct", lambda x: aten.alias.default(x), lambda g: (randint(g, 4, 5),), "aten.alias.default", direct=True)
case("pow_i64_zero_direct", lambda x: aten.pow.Tensor_Scalar(x, 0), lambda g: (randint(g, 4, 5),), "aten.pow.Tensor_Scalar", direct=True)
case("pow_i64_float_exp", lambda x: x**0.5, lambda g: (randint(g, 4, 5, lo=0),), "aten.pow.Tensor_Scalar")
case("pow_int_tensor_falls_back", lambda x, y: torch.pow(x, y), lambda g: (randint(g, 4, 5), randint(g, 5, lo=0, hi=4)), (), fallback={"aten.pow.Tensor_Tensor": "integer pow"})
case("pow_tensor_tensor", lambda x, y: torch.pow(x, y), lambda g: (positive(g, 3, 5, 7), randn(g, 7)), "aten.pow.Tensor_Tensor")
case("pow_scalar_base", lambda x: torch.pow(2.0, x), lambda g: (randn(g, 3, 5),), "aten.pow.Scalar")

# ---- unary math ---------------------------------------------------------------

UNARY = {
    "neg": (torch.neg, randn), "abs": (torch.abs, randn), "exp": (torch.exp, randn), "log": (torch.log, positive),
    "sqrt": (torch.sqrt, positive), "rsqrt": (torch.rsqrt, positive), "reciprocal": (torch.reciprocal, positive),
    "sin": (torch.sin, randn), "cos": (torch.cos, randn), "tanh": (torch.tanh, randn), "sigmoid": (torch.sigmoid, randn),
    "relu": (torch.relu, randn), "erf": (torch.erf, randn),
}
for op, (fn, make) in UNARY.items():
    case(f"{op}_f32", lambda x, fn=fn: fn(x), lambda g, make=make: (make(g, 3, 5, 7),), f"aten.{op}.default")
    case(f"{op}_f16_transposed", lambda x, fn=fn: fn(x), lambda g, make=make: (transposed(make(g, 5, 6, dtype=f16)),), f"aten.{op}.default")
for op, dtype in (("exp", bf16), ("sigmoid", bf16), ("log", f64), ("tanh", f64), ("rsqrt", bf16)):
    fn, make = UNARY[op]
    case(f"{op}_{dtype}".replace("torch.", ""), lambda x, fn=fn: fn(x), lambda g, make=make, dtype=dtype: (make(g, 4, 7, dtype=dtype),), f"aten.{op}.default")
case("neg_i64", torch.neg, lambda g: (randint(g, 3, 5),), "aten.neg.default")
case("abs_i32_sliced", torch.abs, lambda g: (strided(randint(g, 3, 5, dtype=i32)),), "aten.abs.default")
case("relu_i64", torch.relu, lambda g: (randint(g, 3, 5),), "aten.relu.default")
case("exp_of_int", torch.exp, lambda g: (randint(g, 3, 5),), "aten.exp.default")
case("sqrt_of_i32", torch.sqrt, lambda g: (randint(g, 3, 5, lo=0, dtype=i32),), "aten.sqrt.default")
case("sin_f64", torch.sin, lambda g: (randn(g, 3, 5, dtype=f64),), "aten.sin.default")
case("silu_direct", lambda x: aten.silu.default(x), lambda g: (randn(g, 3, 5, 7),), "aten.silu.default", direct=True)
case("silu_bf16_direct", lambda x: aten.silu.default(x), lambda g: (randn(g, 5, 7, dtype=bf16),), "aten.silu.default", direct=True)
case("silu_compiled", F.silu, lambda g: (randn(g, 3, 5, 7),), "aten.sigmoid.default")
case("gelu", F.gelu, lambda g: (randn(g, 3, 5, 7),), "aten.gelu.default")
case("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), lambda g: (randn(g, 3, 5, 7),), "aten.gelu.default")
case("gelu_f16_transposed", F.gelu, lambda g: (transposed(randn(g, 5, 6, dtype=f16)),), "aten.gelu.default")

# ---- special values (isinf/isnan/isfinite are comparisons in kiln) --------------
# Dynamo's decompositions rewrite isfinite before kiln sees it: its cases build the ATen graph directly.

for op in ("isinf", "isnan", "isfinite"):
    kw = dict(direct=True) if op == "isfinite" else {}
    fn = (lambda x: aten.isfinite.default(x)) if kw else getattr(torch, op)
    case(f"{op}_f32", fn, lambda g: (with_specials(g, 3, 5, 7),), f"aten.{op}.default", **kw)
    case(f"{op}_f16_transposed", fn, lambda g: (transposed(with_specials(g, 5, 6, dtype=f16)),), f"aten.{op}.default", **kw)
    case(f"{op}_bf16", fn, lambda g: (with_specials(g, 4, 7, dtype=bf16),), f"aten.{op}.default", **kw)
    case(f"{op}_i64", fn, lambda g: (randint(g, 3, 5),), f"aten.{op}.default", **kw)
    case(f"{op}_bool", fn, lambda g: (randbool(g, 4),), f"aten.{op}.default", **kw)

# ---- clamps and where ---------------------------------------------------------

case("clamp_both", lambda x: torch.clamp(x, -0.5, 0.5), lambda g: (randn(g, 3, 5, 7),), "aten.clamp.default")
case("clamp_min_only", lambda x: torch.clamp(x, min=0.1), lambda g: (transposed(randn(g, 5, 6)),), "aten.clamp.default")
case("clamp_max_only", lambda x: torch.clamp(x, max=0.1), lambda g: (randn(g, 5, 6, dtype=f16),), "aten.clamp.default")
case("clamp_i64", lambda x: torch.clamp(x, -2, 3), lambda g: (randint(g, 4, 5),), "aten.clamp.default")
case("clamp_i64_float_bound", lambda x: torch.clamp(x, -2.5, 3.5), lambda g: (randint(g, 4, 5),), "aten.clamp.default")
case("clamp_tensor_bounds", lambda x, lo, hi: torch.clamp(x, lo, hi), lambda g: (randn(g, 3, 5, 7), randn(g, 7) - 1, randn(g, 5, 1) + 1), "aten.clamp.Tensor")
case("clamp_min_direct", lambda x: aten.clamp_min.default(x, 0.0), lambda g: (randn(g, 3, 5),), "aten.clamp_min.default", direct=True)
case("clamp_max_direct", lambda x: aten.clamp_max.default(x, 2), lambda g: (randint(g, 3, 5),), "aten.clamp_max.default", direct=True)
case("hardtanh_direct", lambda x: aten.hardtanh.default(x, -0.5, 0.25), lambda g: (randn(g, 3, 5),), "aten.hardtanh.default", direct=True)
case("hardtanh_compiled", F.hardtanh, lambda g: (randn(g, 3, 5, 7) * 2,), "aten.hardtanh.default")
case("relu6", F.relu6, lambda g: (randn(g, 3, 5, 7) * 4,), "aten.hardtanh.default")
case("where_bcast", lambda c, x, y: torch.where(c, x, y), lambda g: (randbool(g, 3, 5, 7), randn(g, 5, 7), randn(g, 3, 1, 1)), "aten.where.self")
case("where_scalar_other", lambda c, x: torch.where(c, x, 0.0), lambda g: (randbool(g, 4, 6), randn(g, 4, 6)), "aten.where.self")
case("where_i64_f32_promote", lambda c, x, y: torch.where(c, x, y), lambda g: (randbool(g, 4, 6), randint(g, 4, 6), randn(g, 6)), "aten.where.self")
case("where_f16_transposed", lambda c, x, y: torch.where(c, x, y), lambda g: (randbool(g, 5, 6), transposed(randn(g, 5, 6, dtype=f16)), randn(g, 5, 6, dtype=f16)), "aten.where.self")
case("where_bool_values", lambda c, x, y: torch.where(c, x, y), lambda g: (randbool(g, 5, 6), randbool(g, 5, 6), randbool(g, 6)), "aten.where.self")
case("where_from_compare", lambda x: torch.where(x > 0, x, x * 0.1), lambda g: (randn(g, 3, 5, 7),), ("aten.where.self", "aten.gt.Scalar"))

# ---- casts and copies ----------------------------------------------------------

case("to_f16", lambda x: x.to(f16), lambda g: (randn(g, 3, 5, 7),), "aten._to_copy.default")
case("to_bf16_transposed", lambda x: x.to(bf16) * 2, lambda g: (transposed(randn(g, 5, 6)),), "aten._to_copy.default")
case("to_f64_from_f16", lambda x: x.to(f64), lambda g: (randn(g, 5, 6, dtype=f16),), "aten._to_copy.default")
case("to_i32_truncates", lambda x: x.to(i32), lambda g: (randn(g, 5, 6) * 10,), "aten._to_copy.default")
case("to_f32_from_i64", lambda x: x.float(), lambda g: (randint(g, 5, 6),), "aten._to_copy.default")
case("to_bool_from_f32", lambda x: x.bool(), lambda g: (randint(g, 5, 6, lo=-1, hi=2).float(),), "aten._to_copy.default")
case("to_f32_from_bool", lambda x: x.float() + 1, lambda g: (randbool(g, 5, 6),), "aten._to_copy.default")
case("clone_transposed", lambda x: x.clone() + 1, lambda g: (transposed(randn(g, 5, 6)),), ("aten.clone.default", "aten.add.Tensor"))
case("clone_direct", lambda x: aten.clone.default(x), lambda g: (strided(randn(g, 3, 5)),), "aten.clone.default", direct=True)
case("contiguous_direct", lambda x: aten.contiguous.default(x), lambda g: (transposed(randn(g, 5, 7)),), "aten.contiguous.default", direct=True)
case("alias_direct", lambda x: aten.mul.Tensor(aten.alias.default(x), 2), lambda g: (randn(g, 3, 5),), ("aten.alias.default", "aten.mul.Tensor"), direct=True)
case("detach_direct", lambda x: aten.add.Tensor(aten.detach.default(x), 1), lambda g: (randn(g, 3, 5),), ("aten.detach.default", "aten.add.Tensor"), direct=True)
case("lift_fresh_copy_direct", lambda x: aten.sub.Tensor(aten.lift_fresh_copy.default(x), 1), lambda g: (randint(g, 3, 5),), ("aten.lift_fresh_copy.default", "aten.sub.Tensor"), direct=True)
