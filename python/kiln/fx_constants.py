"""Scalar and empty tensors that tracing captured as constants become literals.

A model that builds a tensor from a Python number inside forward (transformers'
`1.0 - mask` on a tensor constant, `torch.tensor(finfo.min)`) reaches kiln as a
get_attr of a `_tensor_constantN` attribute that make_fx created: a value fixed
at trace time, never a parameter or buffer the user could update. As a weight
it is bound by pointer and opaque to compile-time evaluation, so a mask built
from it cannot be recognized (passes/causal_masks.cpp). As `scalar_tensor` it
is a literal (an integer only up to 2**53, what a literal's double holds).
Empty ones (transformers' key/value caches start as `torch.tensor([])`,
concatenated with the first keys) become `full` of their shape. Other
constants stay weights."""

from __future__ import annotations

import re

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import unset_fake_temporarily

from kiln.fx_rewrites import replace_with_call

_TRACED_CONSTANT = re.compile(r"_tensor_constant\d+")


def _inlinable_constant(gm: fx.GraphModule, node: fx.Node) -> torch.Tensor | None:
    if node.op != "get_attr" or not _TRACED_CONSTANT.fullmatch(str(node.target)):
        return None
    value = getattr(gm, node.target, None)
    if type(value) is not torch.Tensor or value.requires_grad or value.is_complex():
        return None
    if value.numel() == 0:
        return value
    if value.dim() != 0:
        return None
    # kiln's literals hold a double: an integer beyond 2**53 would not survive the trip.
    return value if value.is_floating_point() or abs(_number(value)) <= 2**53 else None


def _number(value: torch.Tensor):
    with unset_fake_temporarily():  # compile runs under Dynamo's fake mode; the constant is real
        return value.item()


def _literal_call(value: torch.Tensor) -> tuple:
    """The ATen call (target, args, kwargs) that creates `value`."""
    kwargs = {"dtype": value.dtype, "device": value.device}
    if value.numel() == 0:
        return torch.ops.aten.full.default, (list(value.shape), 0), kwargs
    return torch.ops.aten.scalar_tensor.default, (_number(value),), kwargs


def inline_small_constants(gm: fx.GraphModule) -> int:
    """Replaces each 0-dim or empty traced tensor constant of `gm` by a literal call; returns how many."""
    count = 0
    for node in list(gm.graph.nodes):
        value = _inlinable_constant(gm, node)
        if value is not None:
            replace_with_call(gm, node, *_literal_call(value))
            count += 1
    if count:
        gm.recompile()
    return count
