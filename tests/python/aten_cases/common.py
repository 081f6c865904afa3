"""The vocabulary of the ATen op cases: seeded input makers, non-contiguous
layouts, the Case record and case(), which appends to CASES."""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch

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


def with_specials(g, *shape, dtype=f32):
    """randn values with +inf, -inf and NaN mixed in (each about one element in six)."""
    x = torch.randn(shape, generator=g, dtype=f32)
    kind = torch.randint(0, 6, shape, generator=g)
    x[kind == 0] = float("inf")
    x[kind == 1] = float("-inf")
    x[kind == 2] = float("nan")
    return x.to(dtype)


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
