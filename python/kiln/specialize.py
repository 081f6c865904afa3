"""Dynamic shapes by cheap re-specialization.

With torch.compile(dynamic=True), or Dynamo's automatic dynamic shapes after a
second input size, the ATen graph kiln receives has symbolic sizes (a batch
dimension `s0`, SymInt inputs, sym_size nodes). kiln's IR is static, so the
graph is specialized per distinct set of input shapes: the symbolic scalars
are replaced by their values, every node's value gets concrete sizes, and the
concrete graph goes through the usual partition and kiln compile. What does
not depend on the shapes is reused: Dynamo's trace and the ATen graph (most of
a compile), the weights (bound by pointer), and folded constants (shared by
the weight registry). The first specialization uses the example's sizes, so
the compile report describes it; the others happen on first use.

Concrete values: the symbolic graph's own values (meta["val"]: sizes, strides
and offsets as expressions of the size symbols) with the symbols bound to the
call's sizes, made as fake tensors directly (kiln.fake_values). With the
graph copy, 15 ms for a 4-layer GPT-2 decoding step on the development CPU,
where running every node again on fake tensors took 49 ms of 83; that stays
the way for a graph whose symbols cannot all be read off its inputs (a size
from data, an input size that is an expression).

The cache of specializations (ShapeSpecialized) holds at most
MAX_SPECIALIZATIONS per graph and MAX_ARENA_BYTES of their activation arenas.
Past either, the one dropped is the one called the fewest times, the most
recently used of those: a decode loop that walks more lengths than the cache
holds keeps the lengths it met first, instead of dropping each before its
next use as least-recently-used would (the second generate() of a long
sequence would re-specialize every step)."""

from __future__ import annotations

import sympy
import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import free_symbols

from kiln.fake_values import fake_tensor
from kiln.gc_pause import gc_paused
from kiln.lazy_graph_module import lazy_graph_module

MAX_SPECIALIZATIONS = 256  # per graph
MAX_ARENA_BYTES = 1 << 30  # the cached specializations' activation arenas together, per graph


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


class _Unbound(Exception):
    """A value whose sizes the bound symbols do not decide."""


class SymbolicValues:
    """A symbolic graph's node values as functions of its size symbols, which are read off the inputs: a
    placeholder's size or stride that is a bare symbol, or a SymInt placeholder. `ready` is False when some
    value depends on a symbol no input gives."""

    def __init__(self, gm: fx.GraphModule):
        self.nodes = [n for n in gm.graph.nodes if n.op != "output"]
        self.placeholders = [n for n in self.nodes if n.op == "placeholder"]
        self.sources: list[tuple[int, str, int, sympy.Symbol]] = []  # (input, "size"/"stride"/"value", dim, symbol)
        for i, node in enumerate(self.placeholders):
            val = node.meta.get("val")
            if isinstance(val, torch.SymInt):
                self._source(i, "value", 0, val)
            elif isinstance(val, torch.Tensor):
                for d, s in enumerate(val.shape):
                    self._source(i, "size", d, s)
                for d, s in enumerate(val.stride()):
                    self._source(i, "stride", d, s)
        first_source = {}
        for source in self.sources:
            first_source.setdefault(source[3], source)
        symbols = {n: free_symbols(n.meta.get("val")) for n in self.nodes}
        self.ready = all(found <= first_source.keys() for found in symbols.values())
        # Values that no symbol decides are the same in every specialization: made once, in one fake mode
        # that every specialization's values share (a 12-layer LLaMA decoding step: most of its ~1300).
        self._mode = FakeTensorMode()
        self._fixed_nodes = [n for n, found in symbols.items() if not found]
        self._fixed: dict[fx.Node, object] | None = None  # their values, from the first values() call
        # What the cache's key reads: one place per symbol when every value follows from the symbols (Dynamo's
        # guards keep the inputs consistent with them and fix every other size); else the sizes and strides
        # of the inputs whose sizes can change.
        self.key_sources = list(first_source.values())
        self.varying = sorted(i for i, n in enumerate(self.placeholders) if free_symbols(n.meta.get("val")))

    def _source(self, index: int, kind: str, dim: int, s) -> None:
        if isinstance(s, torch.SymInt) and isinstance(s.node.expr, sympy.Symbol):
            self.sources.append((index, kind, dim, s.node.expr))

    def key(self, args) -> tuple:
        """What a specialization depends on: the symbols' values, or the varying inputs' sizes and strides
        and scalar values (the other inputs' are fixed: Dynamo guards them). Dynamo's example values have
        SymInts, read through their hints."""
        if self.ready:
            return tuple(map(_hint, _reads(args, self.key_sources)))
        return tuple([(tuple(map(_hint, args[i].shape)), tuple(map(_hint, args[i].stride())))
                      if isinstance(args[i], torch.Tensor) else _hint(args[i]) for i in self.varying])

    def call_key(self, args) -> tuple:
        """key() of a call's real arguments (int sizes), read without hints: a 12-layer GPT-2 decoding step
        has 48 symbols (each cached key and value its own length)."""
        return tuple(_reads(args, self.key_sources)) if self.ready else self.key(args)

    def values(self, args) -> dict | None:
        """Each node's value with the symbols bound to `args`' sizes (real tensors and ints, or Dynamo's
        example values); None when they cannot be bound consistently or some value is not decided by them."""
        bindings: dict[sympy.Symbol, int] = {}
        for (*_, symbol), n in zip(self.sources, map(_hint, _reads(args, self.sources))):
            if bindings.setdefault(symbol, n) != n:
                return None
        known: dict = {}

        def concrete(s) -> int:
            if not isinstance(s, torch.SymInt):
                return s
            expr = s.node.expr
            if expr not in known:
                value = expr.xreplace(bindings)  # a bare symbol becomes the int itself
                if not (isinstance(value, int) or getattr(value, "is_Integer", False)):
                    raise _Unbound(str(expr))
                known[expr] = int(value)
            return known[expr]

        mode = self._mode

        def make(v):
            if v is None or type(v) in (bool, int, float):
                return v
            if isinstance(v, torch.SymInt):
                return concrete(v)
            if isinstance(v, torch.Tensor):
                return fake_tensor(mode, [concrete(s) for s in v.shape], [concrete(s) for s in v.stride()],
                                   concrete(v.storage_offset()), v.dtype, v.device)
            if isinstance(v, (list, tuple)):
                made = [make(x) for x in v]
                return made if isinstance(v, list) else tuple(made)
            raise _Unbound(type(v).__name__)

        try:
            fixed = self._fixed or {}
            values = {n: fixed[n] if n in fixed else make(n.meta.get("val")) for n in self.nodes}
        except _Unbound:
            return None
        if self._fixed is None:
            self._fixed = {n: values[n] for n in self._fixed_nodes}
        for node, a in zip(self.placeholders, args):  # the inputs agree with what the graph was traced for
            v = values[node]
            if isinstance(a, torch.Tensor) and (not isinstance(v, torch.Tensor) or tuple(v.shape) != tuple(
                    _hint(s) for s in a.shape)):
                return None
        return values


def _reads(args, sources) -> list:
    """The value each (input, kind, dim, symbol) source reads from `args`, in one comprehension (a call's key
    reads 48 of them on a 12-layer GPT-2 step)."""
    return [args[i] if kind == "value" else args[i].shape[dim] if kind == "size" else args[i].stride(dim)
            for i, kind, dim, _ in sources]


def _replace_uses(node: fx.Node, value) -> None:
    for user in list(node.users):
        user.args = fx.node.map_aggregate(user.args, lambda a: value if a is node else a)
        user.kwargs = fx.node.map_aggregate(user.kwargs, lambda a: value if a is node else a)


def specialize(gm: fx.GraphModule, args, symbolic: SymbolicValues | None = None) -> fx.GraphModule:
    """A copy of `gm` for these arguments' shapes: symbolic scalars become
    constants and every node's meta["val"] a fake tensor of static shape.
    `args` are real tensors and ints, or Dynamo's example values (their hints).
    `symbolic` (gm's SymbolicValues) gives the values without running the graph."""
    values = symbolic.values(args) if symbolic is not None and symbolic.ready else None
    if values is None:
        values = _Propagate(gm).run_fake(args)
    graph = fx.Graph()
    copies: dict[fx.Node, fx.Node] = {}
    graph.output(graph.graph_copy(gm.graph, copies))
    for original, node in copies.items():
        value = values.get(original)
        if node.op == "placeholder":
            node.meta["val"] = value
            if not isinstance(value, torch.Tensor):
                _replace_uses(node, value)
        elif node.op == "call_function" and isinstance(value, (int, float, bool)) and not isinstance(value, torch.Tensor):
            _replace_uses(node, value)
            graph.erase_node(node)
        elif node.op != "output":
            node.meta["val"] = value
    graph.lint()
    return lazy_graph_module(gm, graph)


class _Propagate(fx.Interpreter):
    """Runs the graph on fake tensors and records each node's value."""

    def __init__(self, gm: fx.GraphModule):
        super().__init__(gm)
        self.values: dict[fx.Node, object] = {}

    def run_node(self, n: fx.Node):
        result = super().run_node(n)
        self.values[n] = result
        return result

    def run_fake(self, args) -> dict:
        mode = FakeTensorMode()
        with mode:
            fakes = [
                fake_tensor(mode, [_hint(s) for s in a.shape], [_hint(s) for s in a.stride()],
                            _hint(a.storage_offset()), a.dtype, a.device)
                if isinstance(a, torch.Tensor) else _hint(a)
                for a in args
            ]
            self.run(*fakes)
        return self.values


class _Specialization:
    __slots__ = ("module", "arena_bytes", "calls", "last_used")

    def __init__(self, module: torch.nn.Module, arena_bytes: int, tick: int):
        self.module, self.arena_bytes, self.calls, self.last_used = module, arena_bytes, 0, tick


class ShapeSpecialized(torch.nn.Module):
    """Runs a graph with symbolic shapes: one kiln compile per distinct set of
    input shapes (cached as the module docstring says), each a specialization
    of the same ATen graph. `compile_static(gm)` returns (module, report)."""

    def __init__(self, gm: fx.GraphModule, compile_static):
        super().__init__()
        self.gm = gm
        self.compile_static = compile_static
        self.symbolic = SymbolicValues(gm)
        self.compiled: dict[tuple, _Specialization] = {}
        self._tick = 0

    def add(self, args):
        """Compiles the specialization for `args` (Dynamo's example values for the first); returns its report."""
        return self._add(self.symbolic.key(args), args)

    def _add(self, key: tuple, args):
        with gc_paused():
            module, report = self.compile_static(specialize(self.gm, args, self.symbolic))
        self._tick += 1
        self.compiled[key] = _Specialization(module, sum(arena for _, _, arena in report.regions), self._tick)
        self._trim(keep=key)
        return report

    def _trim(self, keep: tuple) -> None:
        """Drops specializations past the count and arena limits: the least called, the most recent of those."""
        while len(self.compiled) > 1 and (
                len(self.compiled) > MAX_SPECIALIZATIONS
                or sum(e.arena_bytes for e in self.compiled.values()) > MAX_ARENA_BYTES):
            victim = min((k for k in self.compiled if k != keep),
                         key=lambda k: (self.compiled[k].calls, -self.compiled[k].last_used))
            del self.compiled[victim]

    def forward(self, *args):
        key = self.symbolic.call_key(args)
        entry = self.compiled.get(key)
        if entry is None:
            self._add(key, args)
            entry = self.compiled[key]
        self._tick += 1
        entry.calls += 1
        entry.last_used = self._tick
        return entry.module(*args)
