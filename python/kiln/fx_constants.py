"""Scalar tensors that tracing captured as constants become scalar_tensor calls.

A model that builds a tensor from a Python number inside forward (transformers'
`1.0 - mask` on a tensor constant, `torch.tensor(finfo.min)`) reaches kiln as a
get_attr of a `_tensor_constantN` attribute that make_fx created: a value fixed
at trace time, never a parameter or buffer the user could update. As a weight
it is bound by pointer and opaque to compile-time evaluation, so a mask built
from it cannot be recognized (passes/causal_masks.cpp). As `scalar_tensor` it
is a literal. Only 0-dim constants are rewritten; larger ones stay weights."""

from __future__ import annotations

import re

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import unset_fake_temporarily

_TRACED_CONSTANT = re.compile(r"_tensor_constant\d+")


def _traced_scalar(gm: fx.GraphModule, node: fx.Node) -> torch.Tensor | None:
    if node.op != "get_attr" or not _TRACED_CONSTANT.fullmatch(str(node.target)):
        return None
    value = getattr(gm, node.target, None)
    if type(value) is not torch.Tensor or value.dim() != 0 or value.requires_grad or value.is_complex():
        return None
    return value


def inline_scalar_constants(gm: fx.GraphModule) -> int:
    """Replaces each 0-dim traced tensor constant of `gm` by a scalar_tensor call; returns how many."""
    count = 0
    for node in list(gm.graph.nodes):
        value = _traced_scalar(gm, node)
        if value is None:
            continue
        with unset_fake_temporarily():  # compile runs under Dynamo's fake mode; the constant is real
            number = value.item()
        with gm.graph.inserting_before(node):
            literal = gm.graph.call_function(torch.ops.aten.scalar_tensor.default, (number,),
                                             {"dtype": value.dtype, "device": value.device})
        literal.meta = dict(node.meta)
        node.replace_all_uses_with(literal)
        gm.graph.erase_node(node)
        count += 1
    if count:
        gm.recompile()
    return count
