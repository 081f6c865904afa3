"""Dynamic shapes by cheap re-specialization.

With torch.compile(dynamic=True), or Dynamo's automatic dynamic shapes after a
second input size, the ATen graph kiln receives has symbolic sizes (a batch
dimension `s0`, SymInt inputs, sym_size nodes). kiln's IR is static, so the
graph is specialized per distinct set of input shapes: the symbolic scalars
are replaced by their values, shapes are re-propagated with fake tensors, and
the concrete graph goes through the usual partition and kiln compile. What
does not depend on the shapes is reused: Dynamo's trace and AOT's ATen graph
(most of a compile), the weights (bound by pointer), and folded constants
(shared by the weight registry). The first specialization uses the example's
sizes, so the compile report describes it; the others happen on first use."""

from __future__ import annotations

import collections

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import free_symbols

MAX_SPECIALIZATIONS = 32  # per graph; the least recently used one is dropped beyond that


def has_symbolic_shapes(gm: fx.GraphModule) -> bool:
    for node in gm.graph.nodes:
        if node.op == "placeholder" and free_symbols(node.meta.get("val")):
            return True
    return False


def _hint(value):
    """A concrete int for a SymInt from Dynamo (its example value), an int unchanged."""
    if isinstance(value, torch.SymInt):
        return int(value.node.hint) if value.node.hint is not None else int(value)
    return value


def shape_key(args) -> tuple:
    key = []
    for a in args:
        if isinstance(a, torch.Tensor):
            key.append((tuple(_hint(s) for s in a.shape), tuple(_hint(s) for s in a.stride()), a.dtype))
        else:
            key.append(_hint(a))
    return tuple(key)


def _replace_uses(node: fx.Node, value) -> None:
    for user in list(node.users):
        user.args = fx.node.map_aggregate(user.args, lambda a: value if a is node else a)
        user.kwargs = fx.node.map_aggregate(user.kwargs, lambda a: value if a is node else a)


def specialize(gm: fx.GraphModule, args) -> fx.GraphModule:
    """A copy of `gm` for these arguments' shapes: symbolic scalars become
    constants and every node's meta["val"] a fake tensor of static shape.
    `args` are real tensors and ints, or Dynamo's example values (their hints)."""
    graph = fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    out = fx.GraphModule(gm, graph)
    mode = FakeTensorMode()
    with mode:
        fakes = [
            torch.empty_strided([_hint(s) for s in a.shape], [_hint(s) for s in a.stride()], dtype=a.dtype,
                                device=a.device)
            if isinstance(a, torch.Tensor) else _hint(a)
            for a in args
        ]
    values = _Propagate(out).run_fake(mode, fakes)
    for node in list(out.graph.nodes):
        value = values.get(node)
        if node.op == "placeholder":
            node.meta["val"] = value
            if not isinstance(value, torch.Tensor):
                _replace_uses(node, value)
        elif node.op == "call_function" and isinstance(value, (int, float, bool)) and not isinstance(value, torch.Tensor):
            _replace_uses(node, value)
            out.graph.erase_node(node)
        elif node.op != "output":
            node.meta["val"] = value
    out.graph.lint()
    out.recompile()
    return out


class _Propagate(fx.Interpreter):
    """Runs the graph on fake tensors and records each node's value."""

    def __init__(self, gm: fx.GraphModule):
        super().__init__(gm)
        self.values: dict[fx.Node, object] = {}

    def run_node(self, n: fx.Node):
        result = super().run_node(n)
        self.values[n] = result
        return result

    def run_fake(self, mode: FakeTensorMode, fakes) -> dict:
        with mode:
            self.run(*fakes)
        return self.values


class ShapeSpecialized(torch.nn.Module):
    """Runs a graph with symbolic shapes: one kiln compile per distinct set of
    input shapes (kept, up to MAX_SPECIALIZATIONS), each a specialization of
    the same ATen graph. `compile_static(gm)` returns (module, report)."""

    def __init__(self, gm: fx.GraphModule, example_args, compile_static):
        super().__init__()
        self.gm = gm
        self.compile_static = compile_static
        self.compiled: collections.OrderedDict[tuple, torch.nn.Module] = collections.OrderedDict()
        self.reports = []  # report.GraphReport of each specialization, in compile order
        self.first_report = self._add(shape_key(example_args), example_args)

    def _add(self, key: tuple, args):
        module, report = self.compile_static(specialize(self.gm, args))
        self.compiled[key] = module
        self.reports.append(report)
        if len(self.compiled) > MAX_SPECIALIZATIONS:
            self.compiled.popitem(last=False)
        return report

    def forward(self, *args):
        key = shape_key(args)
        if key not in self.compiled:
            self._add(key, args)
        self.compiled.move_to_end(key)
        return self.compiled[key](*args)
