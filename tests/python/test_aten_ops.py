"""Every ATen overload kiln lowers, compiled with torch.compile(backend=kiln)
and compared with eager: broadcasting, non-contiguous inputs, odd sizes,
several dtypes, keepdim and negative dims. Each case also asserts through
kiln.explain that its ops were lowered, not left to PyTorch (cases that fall
back on purpose name the reason they expect).

A few overloads never reach a Dynamo graph (core ATen decomposes them, or
they are CompositeImplicit and vanish while tracing); their cases build the
ATen graph directly (`direct=True`) and go through the same partitioner,
importer and compiler (kiln.compile_fx.compile_fx_graph)."""

from __future__ import annotations

import dataclasses
import zlib
from typing import Callable

import pytest
import torch
import torch.nn.functional as F

import kiln
from kiln import _kiln
from kiln.dynamo_backend import kiln_backend

from conftest import assert_close

aten = torch.ops.aten
f16, bf16, f32, f64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
i32, i64 = torch.int32, torch.int64


# Inputs: drawn from a generator seeded by the case's name.


def randn(g, *shape, dtype=f32):
    return torch.randn(shape, generator=g, dtype=f32).to(dtype)


def positive(g, *shape, dtype=f32):
    return (torch.rand(shape, generator=g, dtype=f32) * 2 + 0.1).to(dtype)


def randint(g, *shape, lo=-5, hi=6, dtype=i64):
    return torch.randint(lo, hi, shape, generator=g, dtype=i64).to(dtype)


def randbool(g, *shape):
    return torch.rand(shape, generator=g) < 0.5


def transposed(x):
    """The same shape as x with the last two dims' strides swapped (non-contiguous)."""
    return x.transpose(-1, -2).contiguous().transpose(-1, -2)


def strided(x):
    """The same values as x, read with a step of 2 along the last dim (non-contiguous)."""
    wide = torch.zeros(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype)
    wide[..., ::2] = x
    return wide[..., ::2]


def module(make):
    """An eval-mode module built under a fixed seed (without touching the global RNG), buffers randomized too."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        m = make().eval()
        for b in m.buffers():
            if b.is_floating_point():
                b.copy_(torch.rand_like(b) + 0.5)
    return m


@dataclasses.dataclass
class Case:
    name: str
    fn: Callable
    inputs: Callable  # generator -> tuple of inputs
    targets: tuple  # ATen overloads that must appear lowered
    fallback: dict = dataclasses.field(default_factory=dict)  # target -> expected reason fragment
    direct: bool = False  # build the ATen graph directly instead of through Dynamo
    dispatch: bool = False  # direct, traced at dispatch (make_fx: records factory calls) rather than symbolically
    tol: torch.dtype | None = None  # tolerance dtype when it differs from the output's
    xfail: str | None = None


CASES: list[Case] = []


def case(name, fn, inputs, targets, **kw):
    targets = (targets,) if isinstance(targets, str) else tuple(targets)
    CASES.append(Case(name, fn, inputs, targets, **kw))


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

# ---- views and reshapes ---------------------------------------------------------

case("view", lambda x: x.view(5, 21) + 1, lambda g: (randn(g, 3, 5, 7),), "aten.view.default")
case("view_neg1_i64", lambda x: x.view(-1, 7) * 2, lambda g: (randint(g, 3, 5, 7),), "aten.view.default")
case("reshape_transposed", lambda x: x.reshape(-1) + 1, lambda g: (transposed(randn(g, 5, 7)),), ("aten.view.default",))
case("reshape_permuted_3d", lambda x: x.permute(2, 0, 1).reshape(7, 15), lambda g: (randn(g, 3, 5, 7),), ("aten.permute.default",))
case("reshape_direct", lambda x: aten.reshape.default(x, [7, -1]), lambda g: (transposed(randn(g, 5, 7)),), "aten.reshape.default", direct=True)
case("unsafe_view_direct", lambda x: aten._unsafe_view.default(x, [15, 7]), lambda g: (randn(g, 3, 5, 7),), "aten._unsafe_view.default", direct=True)
case("permute", lambda x: x.permute(2, 0, 1) * 1.0, lambda g: (randn(g, 3, 5, 7),), "aten.permute.default")
case("permute_neg_dims_f16", lambda x: x.permute(-1, -3, -2).contiguous(), lambda g: (randn(g, 3, 5, 7, dtype=f16),), "aten.permute.default")
case("t", lambda x: x.t() + 1, lambda g: (randn(g, 5, 7),), ("aten.permute.default",))
case("t_direct", lambda x: aten.t.default(x), lambda g: (randn(g, 5, 7),), "aten.t.default", direct=True)
case("t_1d_direct", lambda x: aten.t.default(x), lambda g: (randn(g, 7),), "aten.t.default", direct=True)
case("transpose_neg", lambda x: x.transpose(-1, 0) - 1, lambda g: (randn(g, 3, 5, 7),), ("aten.permute.default",))
case("transpose_direct", lambda x: aten.transpose.int(x, 0, -1), lambda g: (randn(g, 3, 5, 7),), "aten.transpose.int", direct=True)
case("expand", lambda x: x.expand(3, 5, 7) + 0, lambda g: (randn(g, 5, 1),), "aten.expand.default")
case("expand_neg1_i32", lambda x: x.expand(4, -1, 7) * 1, lambda g: (randint(g, 1, 5, 1, dtype=i32),), "aten.expand.default")
case("expand_output", lambda x: x.expand(3, 5, 7), lambda g: (randn(g, 5, 1),), "aten.expand.default")
case("slice_step", lambda x: x[:, 1::2] + 1, lambda g: (randn(g, 5, 7),), "aten.slice.Tensor")
case("slice_negative", lambda x: x[..., -4:-1] * 2, lambda g: (randn(g, 3, 5, 7),), "aten.slice.Tensor")
case("slice_of_transposed_i64", lambda x: x[1:4] + 1, lambda g: (transposed(randint(g, 5, 6)),), "aten.slice.Tensor")
case("slice_end_past", lambda x: x[2:100] * 1, lambda g: (randn(g, 5, 3),), "aten.slice.Tensor")
case("select", lambda x: x[:, 2] + 1, lambda g: (randn(g, 3, 5, 7),), "aten.select.int")
case("select_negative", lambda x: x[..., -1] * 2, lambda g: (randn(g, 3, 5, 7, dtype=bf16),), "aten.select.int")
case("squeeze_dim", lambda x: x.squeeze(1) + 1, lambda g: (randn(g, 3, 1, 7),), "aten.squeeze.dims")
case("squeeze_neg_dim", lambda x: x.squeeze(-1) + 1, lambda g: (randn(g, 3, 5, 1),), "aten.squeeze.dims")
case("squeeze_dims", lambda x: x.squeeze((0, -1)) + 1, lambda g: (randn(g, 1, 5, 1),), ("aten.squeeze.dims",))
case("squeeze_all", lambda x: x.squeeze() + 1, lambda g: (randn(g, 1, 5, 1, 7),), ("aten.squeeze.dims",))
case("squeeze_dim_direct", lambda x: aten.squeeze.dim(x, -2), lambda g: (randn(g, 3, 1, 7),), "aten.squeeze.dim", direct=True)
case("squeeze_default_direct", lambda x: aten.squeeze.default(x), lambda g: (randn(g, 1, 5, 1, 7),), "aten.squeeze.default", direct=True)
case("unsqueeze", lambda x: x.unsqueeze(1) + 1, lambda g: (randn(g, 3, 7),), "aten.unsqueeze.default")
case("unsqueeze_neg", lambda x: x.unsqueeze(-1) * x.unsqueeze(0), lambda g: (randn(g, 5),), "aten.unsqueeze.default")

# ---- concatenation, splitting, padding, indexing ------------------------------------

case("cat_dim0", lambda x, y: torch.cat([x, y]), lambda g: (randn(g, 2, 5), randn(g, 3, 5)), "aten.cat.default")
case("cat_neg_dim_3", lambda x, y, z: torch.cat([x, y, z], dim=-1), lambda g: (randn(g, 3, 5, 2), randn(g, 3, 5, 1), transposed(randn(g, 3, 5, 4))), "aten.cat.default")
case("cat_mixed_dtypes", lambda x, y: torch.cat([x, y], 1), lambda g: (randint(g, 3, 2, dtype=i32), randn(g, 3, 4, dtype=f16)), "aten.cat.default")
case("cat_bool", lambda x, y: torch.cat([x, y], 0), lambda g: (randbool(g, 2, 5), randbool(g, 1, 5)), "aten.cat.default")
case("cat_empty_1d", lambda x, e: torch.cat([x, e]) * 2, lambda g: (randn(g, 3, 5), torch.empty(0)), "aten.cat.default")
case("split_equal", lambda x: [t + 1 for t in torch.split(x, 2, dim=1)], lambda g: (randn(g, 3, 5, 7),), "aten.split_with_sizes.default")
case("split_neg_dim", lambda x: [t * 2 for t in x.split(3, dim=-1)], lambda g: (randn(g, 3, 7),), "aten.split_with_sizes.default")
case("split_direct", lambda x: tuple(aten.split.Tensor(x, 3, -1)[i] for i in range(3)), lambda g: (randn(g, 3, 7),), "aten.split.Tensor", direct=True)
case("split_with_sizes", lambda x: [t + 1 for t in torch.split(x, [1, 4, 2], dim=-1)], lambda g: (randn(g, 3, 5, 7),), "aten.split_with_sizes.default")
case("split_with_sizes_i64", lambda x: [t * 2 for t in torch.split(x, [2, 3], dim=0)], lambda g: (randint(g, 5, 4),), "aten.split_with_sizes.default")
case("unbind", lambda x: [t + 1 for t in torch.unbind(x, 1)], lambda g: (randn(g, 3, 4, 5),), ("aten.slice.Tensor", "aten.squeeze.dims"))
case("unbind_direct", lambda x: tuple(aten.unbind.int(x, -1)[i] for i in range(4)), lambda g: (randn(g, 3, 4),), "aten.unbind.int", direct=True)
case("pad_2d", lambda x: F.pad(x, (1, 2, 0, 3), value=0.5), lambda g: (randn(g, 3, 5, 7),), "aten.constant_pad_nd.default")
case("pad_negative_i64", lambda x: F.pad(x, (-1, 2)), lambda g: (randint(g, 3, 5),), "aten.constant_pad_nd.default")
case("pad_transposed_f16", lambda x: F.pad(x, (2, 0)), lambda g: (transposed(randn(g, 5, 6, dtype=f16)),), "aten.constant_pad_nd.default")
case("gather", lambda x, i: torch.gather(x, 1, i), lambda g: (randn(g, 3, 5, 7), randint(g, 3, 4, 7, lo=0, hi=5)), "aten.gather.default")
case("gather_neg_dim_i64", lambda x, i: torch.gather(x, -1, i), lambda g: (randint(g, 4, 6), randint(g, 4, 3, lo=0, hi=6)), "aten.gather.default")
case("index_select", lambda x, i: torch.index_select(x, 0, i), lambda g: (randn(g, 5, 7), torch.tensor([4, 0, 2, 2])), "aten.index_select.default")
case("index_select_neg_dim_i32idx", lambda x, i: torch.index_select(x, -1, i), lambda g: (transposed(randn(g, 5, 7)), torch.tensor([6, 1, 1], dtype=i32)), "aten.index_select.default")
case("embedding", lambda w, i: F.embedding(i, w), lambda g: (randn(g, 10, 6), randint(g, 3, 4, lo=0, hi=10)), "aten.embedding.default")
case("embedding_f16_i32", lambda w, i: F.embedding(i, w), lambda g: (randn(g, 9, 5, dtype=f16), randint(g, 7, lo=0, hi=9, dtype=i32)), "aten.embedding.default")
case("embedding_padding_idx_direct", lambda w, i: aten.embedding.default(w, i, 2), lambda g: (randn(g, 9, 5), randint(g, 3, 4, lo=0, hi=9)), "aten.embedding.default", direct=True)

# ---- creation -------------------------------------------------------------------------

case("full", lambda x: x + torch.full((3, 5), 2.5), lambda g: (randn(g, 3, 5),), "aten.full.default")
case("full_int", lambda x: x * torch.full((5,), 3), lambda g: (randint(g, 3, 5),), "aten.full.default")
case("full_bool_output", lambda x: torch.full((2, 3), True), lambda g: (randn(g, 2),), "aten.full.default")
case("full_direct_f16", lambda x: aten.add.Tensor(aten.full.default([3, 5], 1.5, dtype=f16), x), lambda g: (randn(g, 3, 5, dtype=f16),), "aten.full.default", direct=True, dispatch=True)
case("scalar_tensor_direct", lambda x: aten.mul.Tensor(x, aten.scalar_tensor.default(3.0)), lambda g: (randn(g, 3, 5),), "aten.scalar_tensor.default", direct=True, dispatch=True)
case("scalar_tensor_dtype_direct", lambda x: aten.add.Tensor(x, aten.scalar_tensor.default(2, dtype=i64)), lambda g: (randint(g, 3, 5),), "aten.scalar_tensor.default", direct=True, dispatch=True)
case("arange_end", lambda x: x + torch.arange(7), lambda g: (randn(g, 3, 7),), "aten.arange.start_step")
case("arange_start_step", lambda x: x * torch.arange(1, 14, 2), lambda g: (randint(g, 3, 7),), ("aten.arange.start_step",))
case("arange_float_step", lambda x: x + torch.arange(0.5, 3.0, 0.5), lambda g: (randn(g, 5),), ("aten.arange.start_step",))
case("arange_default_direct", lambda x: aten.add.Tensor(x, aten.arange.default(5, dtype=f32)), lambda g: (randn(g, 2, 5),), "aten.arange.default", direct=True, dispatch=True)
case("arange_start_direct", lambda x: aten.add.Tensor(x, aten.arange.start(2, 7)), lambda g: (randint(g, 5),), "aten.arange.start", direct=True, dispatch=True)
case("arange_start_step_direct", lambda x: aten.add.Tensor(x, aten.arange.start_step(10, 0, -3)), lambda g: (randint(g, 4),), "aten.arange.start_step", direct=True, dispatch=True)

# ---- matrix products ---------------------------------------------------------------------

case("mm", torch.mm, lambda g: (randn(g, 3, 5), randn(g, 5, 7)), "aten.mm.default")
case("mm_transposed_f64", torch.mm, lambda g: (transposed(randn(g, 3, 5, dtype=f64)), transposed(randn(g, 5, 7, dtype=f64))), "aten.mm.default")
case("mm_f16", torch.mm, lambda g: (randn(g, 9, 17, dtype=f16), randn(g, 17, 5, dtype=f16)), "aten.mm.default")
case("mm_bf16", torch.mm, lambda g: (randn(g, 9, 17, dtype=bf16), randn(g, 17, 5, dtype=bf16)), "aten.mm.default")
case("mm_sliced", lambda a, b: a[:, ::2] @ b, lambda g: (randn(g, 4, 10), randn(g, 5, 3)), "aten.mm.default")
case("bmm", torch.bmm, lambda g: (randn(g, 3, 4, 5), randn(g, 3, 5, 7)), "aten.bmm.default")
case("bmm_transposed", lambda a, b: torch.bmm(a, b.transpose(1, 2)), lambda g: (randn(g, 2, 4, 5), randn(g, 2, 7, 5)), "aten.bmm.default")
case("matmul_bcast", torch.matmul, lambda g: (randn(g, 2, 3, 4, 5), randn(g, 5, 7)), ("aten.mm.default", "aten.view.default"))
case("matmul_batched_bcast", torch.matmul, lambda g: (randn(g, 2, 3, 4, 5), randn(g, 3, 5, 6)), ("aten.bmm.default", "aten.expand.default"))
case("matmul_vec", torch.matmul, lambda g: (randn(g, 3, 5), randn(g, 5)), ("aten.mul.Tensor", "aten.sum.dim_IntList"))
case("matmul_direct", lambda a, b: aten.matmul.default(a, b), lambda g: (randn(g, 3, 4, 5), randn(g, 3, 5, 2)), "aten.matmul.default", direct=True)
case("mm_int64_direct", lambda a, b: aten.mm.default(a, b), lambda g: (randint(g, 3, 4), randint(g, 4, 2)), "aten.mm.default", direct=True)
case("linear", lambda x, w, b: F.linear(x, w, b), lambda g: (randn(g, 3, 5), randn(g, 7, 5), randn(g, 7)), ("aten.addmm.default", "aten.permute.default"))
case("linear_3d", lambda x, w, b: F.linear(x, w, b), lambda g: (randn(g, 2, 3, 5), randn(g, 7, 5), randn(g, 7)), "aten.addmm.default")
case("addmm_alpha_beta", lambda b, x, w: torch.addmm(b, x, w, beta=0.5, alpha=2.0), lambda g: (randn(g, 3, 7), randn(g, 3, 5), randn(g, 5, 7)), "aten.addmm.default")
case("addmm_bcast_bias", lambda b, x, w: torch.addmm(b, x, w), lambda g: (randn(g, 1, 7), transposed(randn(g, 3, 5)), randn(g, 5, 7)), "aten.addmm.default")

# ---- convolution, normalization, softmax, pooling -------------------------------------------

case("conv2d", lambda x, w, b: F.conv2d(x, w, b), lambda g: (randn(g, 2, 3, 7, 9), randn(g, 4, 3, 3, 3), randn(g, 4)), "aten.convolution.default")
case("conv2d_stride_pad_dil", lambda x, w: F.conv2d(x, w, None, stride=2, padding=(1, 2), dilation=(2, 1)), lambda g: (randn(g, 1, 3, 9, 8), randn(g, 5, 3, 3, 2)), "aten.convolution.default")
case("conv2d_groups", lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=2), lambda g: (randn(g, 2, 4, 5, 5), randn(g, 6, 2, 3, 3), randn(g, 6)), "aten.convolution.default")
case("conv2d_depthwise_f64", lambda x, w: F.conv2d(x, w, padding=1, groups=3), lambda g: (randn(g, 1, 3, 6, 5, dtype=f64), randn(g, 3, 1, 3, 3, dtype=f64)), "aten.convolution.default")
case("conv2d_channels_last", lambda x, w: F.conv2d(x, w), lambda g: (randn(g, 2, 3, 6, 5).to(memory_format=torch.channels_last), randn(g, 4, 3, 1, 1)), "aten.convolution.default")
case("conv2d_f16", lambda x, w: F.conv2d(x, w, padding=1), lambda g: (randn(g, 1, 3, 6, 5, dtype=f16), randn(g, 4, 3, 3, 3, dtype=f16)), "aten.convolution.default")
case(
    "conv_transpose_falls_back",
    lambda x, w: F.conv_transpose2d(x, w),
    lambda g: (randn(g, 1, 3, 5, 5), randn(g, 3, 2, 3, 3)),
    (),
    fallback={"aten.convolution.default": "transposed convolution"},
)
case("batch_norm_eval", lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=False, eps=1e-3), lambda g: (randn(g, 2, 3, 5, 7), randn(g, 3), positive(g, 3), randn(g, 3), randn(g, 3)), "aten._native_batch_norm_legit_no_training.default")
case("batch_norm_no_affine", lambda x, m, v: F.batch_norm(x, m, v, training=False), lambda g: (transposed(randn(g, 2, 4, 5, 3)), randn(g, 4), positive(g, 4)), "aten._native_batch_norm_legit_no_training.default")
case("batch_norm_bias_only_direct", lambda x, m, v, b: aten._native_batch_norm_legit_no_training.default(x, None, b, m, v, 0.1, 1e-5)[0], lambda g: (randn(g, 2, 3, 4, 4), randn(g, 3), positive(g, 3), randn(g, 3)), "aten._native_batch_norm_legit_no_training.default", direct=True)
case("layer_norm", lambda x, w, b: F.layer_norm(x, (7,), w, b), lambda g: (randn(g, 3, 5, 7), randn(g, 7), randn(g, 7)), "aten.native_layer_norm.default")
case("layer_norm_2d_no_affine", lambda x: F.layer_norm(x, (5, 7), eps=1e-3), lambda g: (randn(g, 3, 5, 7),), "aten.native_layer_norm.default")
case("layer_norm_f16_transposed", lambda x, w, b: F.layer_norm(x, (6,), w, b), lambda g: (transposed(randn(g, 6, 5, dtype=f16)).transpose(0, 1), randn(g, 6, dtype=f16), randn(g, 6, dtype=f16)), "aten.native_layer_norm.default")
case("layer_norm_bias_only_direct", lambda x, b: aten.native_layer_norm.default(x, [7], None, b, 1e-5)[0], lambda g: (randn(g, 3, 7), randn(g, 7)), "aten.native_layer_norm.default", direct=True)
case("softmax_last", lambda x: torch.softmax(x, -1), lambda g: (randn(g, 3, 5, 7),), "aten._softmax.default")
case("softmax_dim0_transposed", lambda x: torch.softmax(x, 0), lambda g: (transposed(randn(g, 5, 7)),), "aten._softmax.default")
case("softmax_f16", lambda x: torch.softmax(x, 1), lambda g: (randn(g, 3, 5, 7, dtype=f16),), "aten._softmax.default")
case("softmax_bf16_to_f32", lambda x: torch.softmax(x, -1, dtype=f32), lambda g: (randn(g, 3, 7, dtype=bf16),), ("aten._softmax.default", "aten._to_copy.default"))
case("softmax_int_direct", lambda x: aten.softmax.int(x, -2), lambda g: (randn(g, 3, 5, 7),), "aten.softmax.int", direct=True)
case("log_softmax", lambda x: F.log_softmax(x, dim=-1), lambda g: (randn(g, 3, 5, 7) * 5,), "aten._log_softmax.default")
case("log_softmax_f64_dim1", lambda x: F.log_softmax(x, dim=1), lambda g: (randn(g, 3, 5, 7, dtype=f64),), "aten._log_softmax.default")
case("log_softmax_int_direct", lambda x: aten.log_softmax.int(x, 0, dtype=f64), lambda g: (randn(g, 4, 6),), "aten.log_softmax.int", direct=True)
case("max_pool2d", lambda x: F.max_pool2d(x, 2), lambda g: (randn(g, 2, 3, 7, 9),), "aten.max_pool2d_with_indices.default")
case("max_pool2d_pad_ceil", lambda x: F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True), lambda g: (randn(g, 1, 2, 7, 8),), "aten.max_pool2d_with_indices.default")
case("max_pool2d_indices", lambda x: F.max_pool2d(x, (2, 3), stride=(1, 2), return_indices=True), lambda g: (randn(g, 1, 2, 6, 7),), "aten.max_pool2d_with_indices.default")
case("max_pool2d_dilation_f16", lambda x: F.max_pool2d(x, 2, dilation=2), lambda g: (randn(g, 1, 2, 7, 7, dtype=f16),), "aten.max_pool2d_with_indices.default")
case("avg_pool2d", lambda x: F.avg_pool2d(x, 2), lambda g: (randn(g, 2, 3, 7, 9),), "aten.avg_pool2d.default")
case("avg_pool2d_pad_exclude", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False), lambda g: (randn(g, 1, 2, 7, 8),), "aten.avg_pool2d.default")
case("avg_pool2d_ceil_divisor", lambda x: F.avg_pool2d(x, 3, stride=2, ceil_mode=True, divisor_override=4), lambda g: (randn(g, 1, 2, 8, 7),), "aten.avg_pool2d.default")
case("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (3, 2)), lambda g: (randn(g, 2, 3, 7, 5),), "aten._adaptive_avg_pool2d.default")
case("adaptive_avg_pool2d_1", lambda x: F.adaptive_avg_pool2d(x, 1), lambda g: (randn(g, 2, 3, 5, 5),), "aten.mean.dim")
case("adaptive_avg_pool2d_direct", lambda x: aten.adaptive_avg_pool2d.default(x, [2, 3]), lambda g: (randn(g, 1, 3, 5, 7),), "aten.adaptive_avg_pool2d.default", direct=True)

# ---- attention -----------------------------------------------------------------------------

case("sdpa_direct", lambda q, k, v: aten.scaled_dot_product_attention.default(q, k, v), lambda g: (randn(g, 2, 3, 5, 8), randn(g, 2, 3, 7, 8), randn(g, 2, 3, 7, 4)), "aten.scaled_dot_product_attention.default", direct=True)
case("sdpa_causal_scale_direct", lambda q, k, v: aten.scaled_dot_product_attention.default(q, k, v, is_causal=True, scale=0.3), lambda g: (randn(g, 1, 2, 6, 8), randn(g, 1, 2, 6, 8), randn(g, 1, 2, 6, 8)), "aten.scaled_dot_product_attention.default", direct=True)
case("sdpa_mask_direct", lambda q, k, v, m: aten.scaled_dot_product_attention.default(q, k, v, attn_mask=m), lambda g: (randn(g, 1, 2, 5, 8), randn(g, 1, 2, 7, 8), randn(g, 1, 2, 7, 8), randn(g, 5, 7)), "aten.scaled_dot_product_attention.default", direct=True)
case("sdpa_bool_mask_direct", lambda q, k, v, m: aten.scaled_dot_product_attention.default(q, k, v, attn_mask=m), lambda g: (randn(g, 1, 2, 5, 8), randn(g, 1, 2, 7, 8), randn(g, 1, 2, 7, 8), torch.rand(5, 7, generator=g) < 0.8), "aten.scaled_dot_product_attention.default", direct=True)
case("sdpa_flash_cpu_direct", lambda q, k, v: aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v)[0], lambda g: (randn(g, 1, 2, 5, 8), randn(g, 1, 2, 7, 8), randn(g, 1, 2, 7, 8)), "aten._scaled_dot_product_flash_attention_for_cpu.default", direct=True)


def sdpa_cuda_overload(call):
    """A CUDA-only SDPA overload: traced as `call`; eager on CPU (no kernel there) runs the math overload."""
    return lambda q, k, v: call(q, k, v)[0] if isinstance(q, torch.fx.Proxy) else aten._scaled_dot_product_attention_math(q, k, v)[0]


qkv_5_7 = lambda g: (randn(g, 1, 2, 5, 8), randn(g, 1, 2, 7, 8), randn(g, 1, 2, 7, 8))  # noqa: E731
case("sdpa_math_direct", lambda q, k, v: aten._scaled_dot_product_attention_math.default(q, k, v, is_causal=True)[0], qkv_5_7, "aten._scaled_dot_product_attention_math.default", direct=True)
case("sdpa_flash_cuda_direct", sdpa_cuda_overload(aten._scaled_dot_product_flash_attention.default), qkv_5_7, "aten._scaled_dot_product_flash_attention.default", direct=True)
case("sdpa_efficient_direct", sdpa_cuda_overload(lambda q, k, v: aten._scaled_dot_product_efficient_attention.default(q, k, v, None, False)), qkv_5_7, "aten._scaled_dot_product_efficient_attention.default", direct=True)
case("sdpa_cudnn_direct", sdpa_cuda_overload(lambda q, k, v: aten._scaled_dot_product_cudnn_attention.default(q, k, v, None, False)), qkv_5_7, "aten._scaled_dot_product_cudnn_attention.default", direct=True)
case("sdpa_overrideable_direct", sdpa_cuda_overload(aten._scaled_dot_product_fused_attention_overrideable.default), qkv_5_7, "aten._scaled_dot_product_fused_attention_overrideable.default", direct=True)

# ---- reductions ---------------------------------------------------------------------------

case("sum_all", lambda x: x.sum(), lambda g: (randn(g, 3, 5, 7),), "aten.sum.dim_IntList")
case("sum_dims_keepdim", lambda x: x.sum(dim=(0, -1), keepdim=True), lambda g: (randn(g, 3, 5, 7),), "aten.sum.dim_IntList")
case("sum_neg_dim_transposed", lambda x: x.sum(-2), lambda g: (transposed(randn(g, 5, 7)),), "aten.sum.dim_IntList")
case("sum_f16", lambda x: x.sum(1), lambda g: (randn(g, 3, 5, 7, dtype=f16),), "aten.sum.dim_IntList")
case("sum_i64", lambda x: x.sum(0), lambda g: (randint(g, 5, 7),), "aten.sum.dim_IntList")
case("sum_i32_promotes", lambda x: x.sum(-1), lambda g: (randint(g, 5, 7, dtype=i32),), "aten.sum.dim_IntList")
case("sum_bool_counts", lambda x: x.sum(1, keepdim=True), lambda g: (randbool(g, 4, 9),), "aten.sum.dim_IntList")
case("sum_dtype_f64", lambda x: x.sum(0, dtype=f64), lambda g: (randn(g, 5, 7),), "aten.sum.dim_IntList")
case("mean_all", lambda x: x.mean(), lambda g: (randn(g, 3, 5, 7),), "aten.mean.default")
case("mean_dims_keepdim", lambda x: x.mean((1, -1), keepdim=True), lambda g: (randn(g, 3, 5, 7),), "aten.mean.dim")
case("mean_bf16_sliced", lambda x: x.mean(-1), lambda g: (strided(randn(g, 4, 9, dtype=bf16)),), "aten.mean.dim")
case("mean_f64", lambda x: x.mean(0), lambda g: (randn(g, 5, 7, dtype=f64),), "aten.mean.dim")
case("amax_keepdim", lambda x: x.amax(-1, keepdim=True), lambda g: (randn(g, 3, 5, 7),), "aten.amax.default")
case("amax_multi_i64", lambda x: x.amax((0, 2)), lambda g: (randint(g, 3, 5, 7),), "aten.amax.default")
case("amin_transposed_f16", lambda x: x.amin(0), lambda g: (transposed(randn(g, 5, 7, dtype=f16)),), "aten.amin.default")
case("amin_i32", lambda x: x.amin(-1), lambda g: (randint(g, 4, 7, dtype=i32),), "aten.amin.default")
case("var_unbiased", lambda x: x.var(-1), lambda g: (randn(g, 3, 5, 7),), "aten.var.correction")
case("var_correction0_keepdim", lambda x: torch.var(x, (0, 1), correction=0, keepdim=True), lambda g: (randn(g, 3, 5, 7),), "aten.var.correction")
case("var_all_f64", lambda x: x.var(), lambda g: (randn(g, 4, 6, dtype=f64),), "aten.var.correction")
case("std_via_var", lambda x: x.std(1), lambda g: (randn(g, 3, 5, 7),), ("aten.var.correction", "aten.sqrt.default"))
case("argmax_all", lambda x: x.argmax(), lambda g: (randn(g, 3, 5, 7),), "aten.argmax.default")
case("argmax_dim_keepdim", lambda x: x.argmax(-1, keepdim=True), lambda g: (randn(g, 3, 5, 7),), "aten.argmax.default")
case("argmax_i64_ties", lambda x: x.argmax(0), lambda g: (randint(g, 6, 5, lo=0, hi=3),), "aten.argmax.default")
case("argmin_dim", lambda x: x.argmin(1), lambda g: (transposed(randn(g, 5, 7)),), "aten.argmin.default")
case("argmin_f16_ties", lambda x: x.argmin(-1), lambda g: (randint(g, 4, 9, lo=0, hi=3).to(f16),), "aten.argmin.default")
case("max_dim", lambda x: torch.max(x, 1), lambda g: (randn(g, 3, 5, 7),), "aten.max.dim")
case("max_dim_keepdim_neg", lambda x: torch.max(x, -1, keepdim=True), lambda g: (randint(g, 3, 5, lo=0, hi=3),), "aten.max.dim")
case("max_dim_values_only", lambda x: torch.max(x, 0).values * 2, lambda g: (randn(g, 5, 7),), "aten.max.dim")
case("min_dim", lambda x: torch.min(x, 0), lambda g: (randn(g, 5, 7, dtype=f64),), "aten.min.dim")
case("min_dim_keepdim_f16", lambda x: torch.min(x, -2, keepdim=True), lambda g: (transposed(randn(g, 4, 6, dtype=f16)),), "aten.min.dim")
case("max_all_falls_back", lambda x: x.max(), lambda g: (randn(g, 3, 5, 7),), (), fallback={"aten.max.default": "no kiln lowering"})
case("mean_default_dtype_direct", lambda x: aten.mean.default(x, dtype=f64), lambda g: (randn(g, 3, 5),), "aten.mean.default", direct=True)
case("sum_default_direct", lambda x: aten.sum.default(x), lambda g: (randint(g, 3, 5, dtype=i32),), "aten.sum.default", direct=True)

# ---- any / all ---------------------------------------------------------------------------

case("any_dim_bool", lambda x: x.any(-1), lambda g: (torch.rand(4, 5, generator=g) < 0.2,), "aten.any.dim")
case("any_dims_keepdim_f32", lambda x: torch.any(x, dim=(0, 2), keepdim=True), lambda g: (randint(g, 3, 5, 7, lo=0, hi=2).float() * (torch.rand(3, 5, 7, generator=g) < 0.1),), "aten.any.dims")
case("any_all_i64", lambda x: x.any(), lambda g: (randint(g, 4, 6, lo=0, hi=2) * 0,), "aten.any.default")
case("any_transposed_f16", lambda x: x.any(0), lambda g: (transposed(randint(g, 5, 6, lo=-1, hi=2).to(f16)),), "aten.any.dim")
case("all_dim_i32", lambda x: x.all(1), lambda g: (randint(g, 4, 5, lo=0, hi=3, dtype=i32),), ("aten.any.dim", "aten.logical_not.default"))
case("all_dims_bool", lambda x: torch.all(x, dim=(-1, -2)), lambda g: (torch.rand(3, 2, 4, generator=g) < 0.9,), ("aten.any.dims", "aten.logical_not.default"))
case("all_default_nan_is_true", lambda x: x.all(), lambda g: (torch.tensor([1.0, float("nan"), -2.0]),), "aten.any.dims")
case("all_dim_direct", lambda x: aten.all.dim(x, -1, True), lambda g: (randint(g, 3, 5, lo=0, hi=3),), "aten.all.dim", direct=True)
case("all_dims_direct", lambda x: aten.all.dims(x, [0, 2]), lambda g: (torch.rand(3, 4, 5, generator=g) < 0.8,), "aten.all.dims", direct=True)
case("all_default_direct", lambda x: aten.all.default(x), lambda g: (randbool(g, 3, 5),), "aten.all.default", direct=True)
case("any_default_direct", lambda x: aten.any.default(x), lambda g: (randint(g, 3, 5, lo=0, hi=2),), "aten.any.default", direct=True)
case("full_like", lambda x: torch.full_like(x, 3.5) + x, lambda g: (randn(g, 3, 5, 7),), ("aten.full_like.default",))
case("full_like_dtype_direct", lambda x: aten.full_like.default(x, 7, dtype=i32), lambda g: (transposed(randn(g, 5, 6)),), "aten.full_like.default", direct=True)
case("zeros_like_ones_like", lambda x: torch.zeros_like(x) + torch.ones_like(x) * x, lambda g: (randint(g, 3, 5),), "aten.full_like.default")
case("sdpa_compiled", lambda q, k, v: F.scaled_dot_product_attention(q, k, v), lambda g: (randn(g, 1, 2, 5, 8), randn(g, 1, 2, 7, 8), randn(g, 1, 2, 7, 8)), ("aten.bmm.default", "aten._softmax.default"))
case("sdpa_compiled_causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), lambda g: (randn(g, 1, 2, 6, 8), randn(g, 1, 2, 6, 8), randn(g, 1, 2, 6, 8)), ("aten.bmm.default", "aten._softmax.default"))

# ---- edge cases: promotion corners, special values, views as outputs ---------------------------

case("gt_i64_float_scalar", lambda x: x > 0.5, lambda g: (randint(g, 4, 5, lo=-2, hi=3),), "aten.gt.Scalar")
case("eq_i32_float_scalar", lambda x: x == 1.5, lambda g: (randint(g, 4, 5, lo=0, hi=3, dtype=i32),), "aten.eq.Scalar")
case("lt_f16_f32_tensor", lambda x, y: x < y, lambda g: (randn(g, 4, 5, dtype=f16), randn(g, 4, 5, dtype=f64)), "aten.lt.Tensor")
case("add_i64_bool", lambda x, m: x + m, lambda g: (randint(g, 4, 5), randbool(g, 4, 5)), "aten.add.Tensor")
case("mul_i32_0d_f64", lambda x, s: x * s, lambda g: (randint(g, 4, 5, dtype=i32), torch.tensor(1.5, dtype=f64)), "aten.mul.Tensor")
case("add_bf16_f16", lambda x, y: x + y, lambda g: (randn(g, 4, 5, dtype=bf16), randn(g, 4, 5, dtype=f16)), "aten.add.Tensor", tol=bf16)
case("add_0d_0d", lambda x, y: x + y, lambda g: (randn(g), randn(g, dtype=f64)), "aten.add.Tensor")
case("div_i64_by_int", lambda x: x / 2, lambda g: (randint(g, 4, 5),), "aten.div.Tensor")
case("add_i8_wraps", lambda x, y: x + y, lambda g: (randint(g, 4, 5, lo=100, hi=127, dtype=torch.int8), randint(g, 4, 5, lo=100, hi=127, dtype=torch.int8)), "aten.add.Tensor")
case("to_i64_from_f16_negative", lambda x: x.to(i64), lambda g: (randn(g, 4, 5, dtype=f16) * 8,), "aten._to_copy.default")
case("compare_to_float", lambda x: (x > 0).to(f32) * x, lambda g: (randn(g, 3, 5, 7),), ("aten.gt.Scalar", "aten._to_copy.default"))
case("where_two_scalars", lambda c: torch.where(c, 1.0, 0.0), lambda g: (randbool(g, 4, 5),), "aten.where.self")
case("sigmoid_tanh_extremes", lambda x: torch.sigmoid(x) + torch.tanh(x), lambda g: (torch.tensor([-1000.0, -90.0, -20.0, 0.0, 20.0, 90.0, 1000.0]),), ("aten.sigmoid.default", "aten.tanh.default"))
case("exp_log_special", lambda x: torch.exp(x) + torch.log(x.abs()), lambda g: (torch.tensor([0.0, -0.0, 100.0, -100.0, float("inf"), float("-inf"), float("nan")]),), ("aten.exp.default", "aten.log.default"))
case("relu_abs_nan_negzero", lambda x: torch.relu(x) + torch.abs(x), lambda g: (torch.tensor([-0.0, 0.0, float("nan"), -float("inf"), 3.0]),), ("aten.relu.default", "aten.abs.default"))
case("clamp_nan", lambda x: torch.clamp(x, -1.0, 1.0), lambda g: (torch.tensor([float("nan"), -5.0, 0.5, 5.0]),), "aten.clamp.default")
case("softmax_masked_rows", lambda x, m: torch.softmax(x.masked_fill(m, float("-inf")), -1), lambda g: (randn(g, 4, 6), torch.tensor([[False] * 6, [True] * 3 + [False] * 3, [True] * 5 + [False], [False] + [True] * 5])), ("aten._softmax.default", "aten.where.self"))
case("softmax_large_values", lambda x: torch.softmax(x * 1000, -1), lambda g: (randn(g, 3, 7),), "aten._softmax.default")
case("log_softmax_large_values", lambda x: F.log_softmax(x * 1000, 0), lambda g: (randn(g, 5, 3),), "aten._log_softmax.default")
case("amax_nan", lambda x: x.amax(-1), lambda g: (torch.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, 6.0]]),), "aten.amax.default")
case("argmax_neg_inf", lambda x: x.argmax(-1), lambda g: (torch.tensor([[float("-inf"), float("-inf")], [float("-inf"), 2.0]]),), "aten.argmax.default")
case("permute_as_output", lambda x: x.permute(2, 0, 1), lambda g: (randn(g, 3, 5, 7),), "aten.permute.default")
case("slice_as_output", lambda x: x[:, 1:4], lambda g: (randn(g, 3, 5, 7),), "aten.slice.Tensor")
case("select_of_transposed_as_output", lambda x: x.t()[2], lambda g: (randn(g, 5, 7),), "aten.select.int")
case("two_outputs_sharing_input", lambda x: (x + 1, x.sum(0)), lambda g: (transposed(randn(g, 5, 7)),), ("aten.add.Tensor", "aten.sum.dim_IntList"))
case("max_pool2d_negative_padded", lambda x: F.max_pool2d(x, 3, stride=1, padding=1), lambda g: (-positive(g, 1, 2, 5, 6) - 1,), "aten.max_pool2d_with_indices.default")
case("avg_pool2d_pad_include", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1), lambda g: (randn(g, 1, 2, 7, 6),), "aten.avg_pool2d.default")
case("avg_pool2d_f64_noncontig", lambda x: F.avg_pool2d(x, 2), lambda g: (transposed(randn(g, 1, 3, 6, 8, dtype=f64)),), "aten.avg_pool2d.default")
case("batch_norm_f16", lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=False), lambda g: (randn(g, 2, 3, 4, 5, dtype=f16), randn(g, 3, dtype=f16), positive(g, 3, dtype=f16), randn(g, 3, dtype=f16), randn(g, 3, dtype=f16)), "aten._native_batch_norm_legit_no_training.default")
case("layer_norm_bf16", lambda x, w, b: F.layer_norm(x, (7,), w, b), lambda g: (randn(g, 3, 5, 7, dtype=bf16), randn(g, 7, dtype=bf16), randn(g, 7, dtype=bf16)), "aten.native_layer_norm.default")
case("gather_transposed_index", lambda x, i: torch.gather(x, 0, i), lambda g: (randn(g, 5, 4), transposed(randint(g, 4, 3, lo=0, hi=5))), "aten.gather.default")
case("cat_0d_promote_f64", lambda x, y: torch.cat([x, y], -2), lambda g: (randn(g, 2, 3), randn(g, 1, 3, dtype=f64)), "aten.cat.default")
case("var_correction_2", lambda x: torch.var(x, -1, correction=2), lambda g: (randn(g, 3, 7),), "aten.var.correction")
case("mean_empty_dim_list_direct", lambda x: aten.mean.dim(x, [], True), lambda g: (randn(g, 3, 5),), "aten.mean.dim", direct=True)

# ---- larger odd sizes: past the CPU kernels' chunk (1024) and threading (32768 elements) sizes ---------

case("big_add_bcast_transposed", lambda x, y: x * 2 + y, lambda g: (transposed(randn(g, 37, 33, 29)), randn(g, 33, 1)), ("aten.add.Tensor", "aten.mul.Tensor"))
case("big_fused_chain_f16", lambda x: torch.sigmoid(x) * torch.tanh(x) - x.abs(), lambda g: (randn(g, 3, 1031, dtype=f16),), ("aten.sigmoid.default", "aten.tanh.default"))
case("big_where_i64", lambda c, x: torch.where(c, x, -x), lambda g: (randbool(g, 41, 1000), randint(g, 41, 1000)), "aten.where.self")
case("big_cast_sliced", lambda x: x.to(f16), lambda g: (strided(randn(g, 35, 1001)),), "aten._to_copy.default")
case("big_mm", torch.mm, lambda g: (randn(g, 67, 129), randn(g, 129, 33)), "aten.mm.default")
case("big_bmm_transposed", lambda a, b: a @ b.transpose(-1, -2), lambda g: (randn(g, 3, 45, 70), randn(g, 3, 31, 70)), "aten.bmm.default")
case("big_sum_all", lambda x: x.sum(), lambda g: (randn(g, 41, 1003),), "aten.sum.dim_IntList")
case("big_sum_mid_dim", lambda x: x.sum(1), lambda g: (randn(g, 7, 1025, 5),), "aten.sum.dim_IntList")
case("big_amax_transposed", lambda x: x.amax(0), lambda g: (transposed(randn(g, 2049, 19)),), "aten.amax.default")
case("big_mean_keepdim", lambda x: x.mean(-1, keepdim=True), lambda g: (randn(g, 40, 1001),), "aten.mean.dim")
case("big_argmax", lambda x: x.argmax(-1), lambda g: (randn(g, 37, 1029),), "aten.argmax.default")
case("big_softmax", lambda x: torch.softmax(x, -1), lambda g: (randn(g, 33, 1031),), "aten._softmax.default")
case("big_layer_norm", lambda x, w, b: F.layer_norm(x, (1025,), w, b), lambda g: (randn(g, 33, 1025), randn(g, 1025), randn(g, 1025)), "aten.native_layer_norm.default")
case("big_conv2d", lambda x, w, b: F.conv2d(x, w, b, padding=1), lambda g: (randn(g, 2, 17, 19, 23), randn(g, 13, 17, 3, 3), randn(g, 13)), "aten.convolution.default")
case("big_max_pool2d", lambda x: F.max_pool2d(x, 3, 2), lambda g: (randn(g, 2, 8, 45, 47),), "aten.max_pool2d_with_indices.default")
case("big_cat", lambda x, y: torch.cat([x, y], 1), lambda g: (randn(g, 40, 700), transposed(randn(g, 40, 333))), "aten.cat.default")

# ---- unusual input layouts and modules with weights ------------------------------------------

case("input_storage_offset", lambda x, y: x * y, lambda g: (randn(g, 6, 9)[1:4, 2:7], randn(g, 8, 5)[3:6]), "aten.mul.Tensor")
case("input_expanded_stride0", lambda x: x.exp() + 1, lambda g: (randn(g, 5, 1).expand(5, 7),), "aten.exp.default")
case("input_same_tensor_twice", lambda x, y: x - y * 2, lambda g: (lambda t: (t, t))(randn(g, 4, 5)), "aten.sub.Tensor")
case("input_negative_offset_view_i64", lambda x: x.sum(-1), lambda g: (randint(g, 7, 8)[2:, 1::3],), "aten.sum.dim_IntList")
case("max_pool2d_channels_last", lambda x: F.max_pool2d(x, 2), lambda g: (randn(g, 2, 3, 6, 7).to(memory_format=torch.channels_last),), "aten.max_pool2d_with_indices.default")
case("module_linear", module(lambda: torch.nn.Linear(5, 7)), lambda g: (randn(g, 2, 3, 5),), "aten.addmm.default")
case("module_conv_bn_relu", module(lambda: torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU())), lambda g: (randn(g, 2, 3, 5, 7),), ("aten.convolution.default", "aten._native_batch_norm_legit_no_training.default", "aten.relu.default"))
case("module_layer_norm", module(lambda: torch.nn.LayerNorm(7)), lambda g: (randn(g, 3, 5, 7),), "aten.native_layer_norm.default")
case("module_embedding", module(lambda: torch.nn.Embedding(11, 6)), lambda g: (randint(g, 3, 4, lo=0, hi=11),), "aten.embedding.default")

# ---- small compositions (several ops in one region) -------------------------------------------

case("mlp_block", lambda x, w, b: F.gelu(F.linear(x, w, b)) * torch.sigmoid(x.sum(-1, keepdim=True)), lambda g: (randn(g, 3, 5), randn(g, 5, 5), randn(g, 5)), ("aten.addmm.default", "aten.gelu.default", "aten.sum.dim_IntList"))
case("rms_norm", lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, lambda g: (randn(g, 3, 5, 7), randn(g, 7)), ("aten.rsqrt.default", "aten.mean.dim", "aten.pow.Tensor_Scalar"))
case("attention_math", lambda q, k, v: torch.softmax(q @ k.transpose(-1, -2) * 0.25, -1) @ v, lambda g: (randn(g, 2, 5, 8), randn(g, 2, 7, 8), randn(g, 2, 7, 4)), ("aten.bmm.default", "aten._softmax.default"))
case("masked_fill", lambda x, m: x.masked_fill(m, -1.0), lambda g: (randn(g, 3, 5, 7), randbool(g, 5, 7)), ("aten.where.self",))
case("mixed_int_float_chain", lambda x, i: (x * i + i.float()).to(f16).sum(0), lambda g: (randn(g, 4, 5), randint(g, 4, 5)), ("aten.mul.Tensor", "aten._to_copy.default", "aten.sum.dim_IntList"))


# ---- ops the model zoo needs (tests/python/test_zoo.py) --------------------------------------

case("bitwise_and_bool_masks", lambda x, y: x & y, lambda g: (randbool(g, 4, 1), randbool(g, 1, 5)), "aten.bitwise_and.Tensor")
case("bitwise_or_not_bool", lambda x, y: ~(x | y), lambda g: (randbool(g, 4, 5), randbool(g, 5)), ("aten.bitwise_or.Tensor", "aten.bitwise_not.default"))
case("bitwise_and_int_falls_back", lambda x, y: x & y, lambda g: (randint(g, 4, 5), randint(g, 5)), (), fallback={"aten.bitwise_and.Tensor": "bool only"})
case("cumsum_f32_dim1", lambda x: torch.cumsum(x, 1), lambda g: (transposed(randn(g, 5, 6)),), "aten.cumsum.default")
case("cumsum_bool_to_i64", lambda x: torch.cumsum(x, -1), lambda g: (randbool(g, 3, 7),), "aten.cumsum.default")
case("cumsum_i32_dtype_f64", lambda x: torch.cumsum(x, 0, dtype=f64), lambda g: (randint(g, 4, 3, dtype=i32),), "aten.cumsum.default")
case("fmod_scalar_f32", lambda x: aten.fmod.Scalar(x, 1.5), lambda g: (randn(g, 3, 5),), "aten.fmod.Scalar", direct=True)
case("fmod_scalar_i64", lambda x: aten.fmod.Scalar(x, -3), lambda g: (randint(g, 4, 5),), "aten.fmod.Scalar", direct=True)
case("fmod_tensor_f32", lambda x, y: torch.fmod(x, y), lambda g: (randn(g, 3, 5), positive(g, 5)), "aten.fmod.Tensor")
case("fmod_tensor_i64_falls_back", lambda x, y: torch.fmod(x, y), lambda g: (randint(g, 3, 5), randint(g, 5, lo=1, hi=4)), (), fallback={"aten.fmod.Tensor": "nonzero constant"})
case("index_two_tensors_broadcast", lambda x, i, j: x[i, j], lambda g: (randn(g, 4, 6, 3), randint(g, 3, 1, lo=-4, hi=4), randint(g, 5, lo=-6, hi=6)), "aten.index.Tensor")
case("index_one_tensor_i32", lambda x, i: x[i], lambda g: (randn(g, 5, 2), randint(g, 2, 3, lo=0, hi=5, dtype=i32)), "aten.index.Tensor")


# ---- the tests -------------------------------------------------------------------------------


def _params():
    for c in CASES:
        marks = [pytest.mark.xfail(strict=True, reason=c.xfail)] if c.xfail else []
        yield pytest.param(c, id=c.name, marks=marks)


def _inputs(c: Case):
    return c.inputs(torch.Generator().manual_seed(zlib.crc32(c.name.encode())))


def _run_direct(c: Case, inputs):
    """Builds the ATen graph of c.fn as written (no decomposition) and compiles it like a Dynamo graph."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    from kiln.compile_fx import compile_fx_graph
    from kiln.options import Options
    from kiln.report import Report

    if c.dispatch:
        from torch.fx.experimental.proxy_tensor import make_fx

        gm = make_fx(c.fn)(*inputs)
    else:
        gm = torch.fx.symbolic_trace(c.fn)
    FakeTensorProp(gm, FakeTensorMode(allow_non_fake_inputs=True)).propagate(*inputs)
    module, report = compile_fx_graph(gm, set(), torch.device("cpu"), Options())
    return module(*inputs), Report([report])


def _check_report(c: Case, report) -> None:
    reasons = {d.target: d.reason for d in report.fallbacks}
    unexpected = {t: r for t, r in reasons.items() if t not in c.fallback}
    assert not unexpected, f"fell back to PyTorch: {unexpected}\n{report}"
    for target, fragment in c.fallback.items():
        assert target in reasons, f"expected {target} to fall back ({fragment!r})\n{report}"
        assert fragment in reasons[target], f"{target} fell back for {reasons[target]!r}, expected {fragment!r}"
    lowered = report.lowered_ops()
    missing = [t for t in c.targets if t not in lowered]
    assert not missing, f"not lowered: {missing}\n{report}"
    assert c.fallback or lowered, f"nothing was lowered\n{report}"


@pytest.mark.parametrize("c", list(_params()))
def test_aten_op(c: Case):
    inputs = _inputs(c)
    with torch.no_grad():
        expected = c.fn(*inputs)
        if c.direct:
            actual, report = _run_direct(c, inputs)
        else:
            actual = torch.compile(c.fn, backend=kiln_backend)(*inputs)
    assert_close(actual, expected, c.tol)
    if not c.direct:
        torch._dynamo.reset()
        report = kiln.explain(c.fn, *inputs)
    _check_report(c, report)


def test_every_aten_target_has_a_case():
    covered = {t for c in CASES for t in c.targets}
    missing = sorted(set(_kiln.aten_targets()) - covered)
    assert not missing, f"ATen overloads kiln lowers without a case here: {missing}"


def test_case_names_are_unique():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
