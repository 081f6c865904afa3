"""Rewrites of the ATen graph before partitioning, for calls whose meaning
depends on torch's strides, which kiln's ATen adapters do not see.

- `as_strided(x, size, stride)` over a contiguous `x` whose requested strides
  are the contiguous strides of `size` (a size-1 dim's stride is free) reads
  x's elements in order: it is `view(x, size)`. Decompositions emit it for
  pooled `[N, C, 1, 1]` features (ConvNeXt, Swin). Other as_strided calls
  stay as they are (and fall back)."""

from __future__ import annotations

import math

import torch
import torch.fx as fx

from kiln.fx_import import contiguous_strides


def _as_strided_is_view(node: fx.Node) -> bool:
    x, size, stride = node.args[0], node.args[1], node.args[2]
    offset = node.args[3] if len(node.args) > 3 else node.kwargs.get("storage_offset")
    val = x.meta.get("val") if isinstance(x, fx.Node) else None
    plain = all(type(v) is int for v in [*size, *stride]) and (offset is None or type(offset) is int)
    if not isinstance(val, torch.Tensor) or not plain or len(size) != len(stride):
        return False
    if not val.is_contiguous() or math.prod(size) != val.numel():
        return False
    if offset is not None and offset != val.storage_offset():
        return False
    return all(s == c for n, s, c in zip(size, stride, contiguous_strides(size)) if n > 1)


def replace_with_call(gm: fx.GraphModule, node: fx.Node, target, args: tuple, kwargs: dict | None = None) -> fx.Node:
    """Replaces `node` of `gm` by a call of `target` that keeps its metadata (the caller recompiles);
    returns the call."""
    with gm.graph.inserting_before(node):
        call = gm.graph.call_function(target, args, kwargs or {})
    call.meta = dict(node.meta)
    node.replace_all_uses_with(call)
    gm.graph.erase_node(node)
    return call


def rewrite_as_strided_views(gm: fx.GraphModule) -> int:
    """Replaces every as_strided call of `gm` that is a view; returns how many."""
    count = 0
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is torch.ops.aten.as_strided.default and _as_strided_is_view(node):
            replace_with_call(gm, node, torch.ops.aten.view.default, (node.args[0], list(node.args[1])))
            count += 1
    if count:
        gm.recompile()
    return count
