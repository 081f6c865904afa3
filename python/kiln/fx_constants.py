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
constants stay weights.

A 0-dim constant is a CPU tensor even in a CUDA graph (torch lets a 0-dim CPU
tensor take part in CUDA ops as a scalar). Swin writes its shifted-window mask
as `copy(mask[h, w], lift_fresh_copy(<CPU 0-dim constant>))`; kiln's regions run
on one device, so such a literal is created on the compile device when every
use of it (through `lift_fresh_copy` and `clone`) meets a tensor on that
device: the same value, and the same result, as torch's CPU scalar."""

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


_PASS_THROUGH = {torch.ops.aten.lift_fresh_copy.default, torch.ops.aten.clone.default}


def _meets_only(node: fx.Node, device: torch.device) -> list[fx.Node] | None:
    """The pass-through nodes (lift_fresh_copy, clone) between the constant `node` and its uses, when
    every use is an op that also reads a tensor on `device`; else None."""
    through, frontier = [], [node]
    while frontier:
        current = frontier.pop()
        for user in current.users:
            if user.op != "call_function":
                return None
            if user.target in _PASS_THROUGH:
                through.append(user)
                frontier.append(user)
                continue
            others = [a.meta.get("val") for a in user.all_input_nodes if a is not current]
            if not any(isinstance(v, torch.Tensor) and v.device.type == device.type for v in others):
                return None
    return through


def _move_to(node: fx.Node, device: torch.device) -> None:
    """node's recorded value (a 0-dim fake tensor) as on `device`."""
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor) and getattr(val, "fake_mode", None) is not None:
        with val.fake_mode:
            node.meta["val"] = torch.empty((), dtype=val.dtype, device=device)


def _literal_call(value: torch.Tensor, device: torch.device | None = None) -> tuple:
    """The ATen call (target, args, kwargs) that creates `value` (on `device` when given)."""
    kwargs = {"dtype": value.dtype, "device": device or value.device}
    if value.numel() == 0:
        return torch.ops.aten.full.default, (list(value.shape), 0), kwargs
    return torch.ops.aten.scalar_tensor.default, (_number(value),), kwargs


def inline_small_constants(gm: fx.GraphModule, device: torch.device | None = None) -> int:
    """Replaces each 0-dim or empty traced tensor constant of `gm` by a literal call; returns how many.
    With a non-CPU compile `device`, a 0-dim CPU constant that only meets tensors on it moves there."""
    count = 0
    for node in list(gm.graph.nodes):
        value = _inlinable_constant(gm, node)
        if value is None:
            continue
        target = None
        if device is not None and device.type != "cpu" and value.dim() == 0 and value.device.type == "cpu":
            through = _meets_only(node, device)
            if through is not None:
                target = device
                for n in through:
                    _move_to(n, device)
        call = replace_with_call(gm, node, *_literal_call(value, target))
        if target is not None:
            _move_to(call, target)
        count += 1
    if count:
        gm.recompile()
    return count
