"""A GraphModule whose Python code is generated only when something first reads or runs it.

kiln builds GraphModules that never run as such: a shape specialization's graph (partitioned right
away) and the partitioner's module before its regions become KilnRegions. A plain GraphModule
generates and compiles its forward's source at construction (about 9 ms for a 12-layer GPT-2
graph on the development CPU), once per module; torch's _LazyGraphModule defers that to the first
forward or read of `.code`, and is used where this torch has it."""

from __future__ import annotations

import torch.fx as fx

try:
    from torch.fx._lazy_graph_module import _LazyGraphModule as _Lazy
except ImportError:  # a torch without it: code generated eagerly, as before
    _Lazy = fx.GraphModule


def lazy_graph_module(root, graph: fx.Graph) -> fx.GraphModule:
    return _Lazy(root, graph)
