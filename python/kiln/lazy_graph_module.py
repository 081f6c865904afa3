"""A GraphModule whose Python code is generated only when something first reads or runs it.

kiln builds GraphModules that never run as such: a shape specialization's graph (partitioned right
away) and the partitioner's module before its regions become KilnRegions. A plain GraphModule
generates and compiles its forward's source at construction (about 9 ms for a 12-layer GPT-2
graph on the development CPU), once per module; torch's _LazyGraphModule defers that to the first
forward or read of `.code`, and is used where this torch has it.

The ATen capture's trace (kiln.aten_capture) builds such modules too: make_fx generates its
GraphModule's code, and dead-code removal generated it again, on graphs kiln then imports without
running them. Under `lazy_graph_modules()` make_fx builds lazy ones (0.07-0.22 s less capture on the
four benchmark models on the dev CPU, docs/benchmarks.md)."""

from __future__ import annotations

import contextlib

import torch.fx as fx

try:
    from torch.fx._lazy_graph_module import _LazyGraphModule as _Lazy
    from torch.fx._lazy_graph_module import _use_lazy_graph_module
except ImportError:  # a torch without it: code generated eagerly, as before
    _Lazy = fx.GraphModule
    _use_lazy_graph_module = None


def lazy_graph_module(root, graph: fx.Graph) -> fx.GraphModule:
    return _Lazy(root, graph)


def lazy_graph_modules():
    """A context in which torch.fx's own builders (make_fx) make lazy GraphModules."""
    return _use_lazy_graph_module(True) if _use_lazy_graph_module is not None else contextlib.nullcontext()
