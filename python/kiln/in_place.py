"""In-place ATen ops on intermediates rewritten to their functional forms, so a graph traced without
functionalization can be captured (kiln.aten_capture).

A trace through FunctionalTensorMode handles every mutation, and costs a third to a half more than a
plain trace (ResNet-50's 53 batch norms and 65 in-place ops: 0.61 s against 0.38 on the dev CPU). Most
inference graphs mutate only intermediates that nothing else aliases: `relu_`, `add_` of a residual,
`masked_fill_` of a fresh mask. In a plain make_fx trace every later use of such a tensor already
refers to the in-place node (the tracer maps a tensor to its newest node), so replacing the op by its
functional form (`aten.relu_.default` by `aten.relu.default`) gives the functionalized graph. That
holds when each mutated storage is written only along one chain (each write's self is the previous
write or the tensor that made the storage), no view of it exists before its last write, no graph
input shares it, and the functional form gives the type the in-place op wrote (an f16 tensor's `add_`
of an f32 one stays f16; `add` would promote). An in-place op that the decomposition table decomposes
(`masked_fill_`) is traced as its functional decomposition plus `copy_(self, result)`; the copy then
goes, as in the functionalized graph. Anything else is left to the functionalized trace, or to
aot_autograd for inputs."""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

INPUT_MUTATION = "the graph mutates an input"


def needs_functionalization(gm: fx.GraphModule) -> bool:
    """True when Dynamo's graph writes through a view (`x[i] = y`), into an `out=` tensor, or in place into
    one of its inputs: then a plain trace would be wasted."""
    for node in gm.graph.nodes:
        if node.target is operator.setitem or "out" in node.kwargs:
            return True
        if node.op == "call_method" and str(node.target).endswith("_") and node.args \
                and isinstance(node.args[0], fx.Node) and node.args[0].op == "placeholder":
            return True
    return False


def _is_mutation(node: fx.Node) -> bool:
    return node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) \
        and node.target._schema.is_mutable


def functional_form(op: torch._ops.OpOverload, decompositions) -> torch._ops.OpOverload | None:
    """The functional overload that computes what in-place `op` writes into its first argument (same
    arguments, one result), or None when there is none or the functional trace would decompose it."""
    schema = op._schema
    args = schema.arguments
    writes = [a.alias_info is not None and a.alias_info.is_write for a in args]
    if not args or not writes[0] or any(writes[1:]) or len(schema.returns) != 1:
        return None
    name = schema.name.split("::")[-1]
    if not name.endswith("_") or name.endswith("__"):
        return None
    packet = getattr(getattr(torch.ops, op.namespace), name[:-1], None)
    functional = getattr(packet, op._overloadname, None) if packet is not None else None
    if not isinstance(functional, torch._ops.OpOverload) or functional in decompositions:
        return None
    if torch._C._dispatch_has_kernel_for_dispatch_key(functional.name(), "CompositeImplicitAutograd"):
        return None  # the functional trace would record its decomposition
    if [(a.name, str(a.type)) for a in functional._schema.arguments] != [(a.name, str(a.type)) for a in args]:
        return None
    return functional


def functionalize_in_place(graph: fx.GraphModule, decompositions) -> str | None:
    """Rewrites the in-place ops of a plain make_fx trace to their functional forms; returns None when
    done (or there were none), else why the graph needs functionalization (INPUT_MUTATION when it writes
    into an input), leaving the graph unchanged."""
    from torch.multiprocessing.reductions import StorageWeakRef

    nodes = list(graph.graph.nodes)
    mutations = [n for n in nodes if _is_mutation(n)]
    if not mutations:
        return None
    position = {n: i for i, n in enumerate(nodes)}
    groups: dict = {}  # storage -> the nodes whose value lives on it, in graph order
    storage_of = {}
    for n in nodes:
        val = n.meta.get("val")
        if isinstance(val, torch.Tensor):
            storage_of[n] = key = StorageWeakRef(val.untyped_storage())
            groups.setdefault(key, []).append(n)
    functional = {}
    for m in mutations:
        target = functional_form(m.target, decompositions)
        if target is None:
            return f"no functional form of {m.target}"
        if not m.args or storage_of.get(m.args[0]) is None or storage_of.get(m.args[0]) != storage_of.get(m):
            return f"{m.name} does not write its first argument"
        functional[m] = target
    for members in groups.values():
        writes = [n for n in members if n in functional]
        if not writes:
            continue
        if any(n.op == "placeholder" for n in members):
            return INPUT_MUTATION
        last_write = position[writes[-1]]
        current = members[0]
        for n in members[1:]:
            if n in functional:
                if n.args[0] is not current:
                    return f"{n.name} writes through a view"
                if any(position[u] > position[n] for u in current.users if u is not n):
                    return f"{current.name} is read after {n.name} writes it"
                current = n
            elif position[n] < last_write:
                return f"{n.name} aliases a tensor written after it"
    for m, target in functional.items():  # last, as it runs each functional op on fake tensors
        if not _same_result(m, target):
            return f"{target} gives another type than {m.target} writes"
    for m, target in functional.items():
        m.target = target
        if target is torch.ops.aten.copy.default and _only_feeds(m.args[1], m, groups, storage_of):
            # An in-place op the table decomposes leaves `copy_(self, result)`, its result read by nothing
            # else; functionalization takes the result itself, so the graph does too (no copy kernel).
            m.replace_all_uses_with(m.args[1])
            graph.graph.erase_node(m)
    return None


def _same_result(node: fx.Node, functional: torch._ops.OpOverload) -> bool:
    """Whether `functional` on the node's (fake) arguments gives the type its in-place op wrote: an in-place
    op keeps its self's dtype (an f16 tensor's add_ of an f32 one stays f16), the functional op promotes."""
    val_of = lambda a: a.meta.get("val") if isinstance(a, fx.Node) else a  # noqa: E731
    try:
        out = functional(*fx.node.map_aggregate(node.args, val_of), **fx.node.map_aggregate(node.kwargs, val_of))
    except Exception:  # noqa: BLE001 - whatever it is, the functionalized trace handles it
        return False
    want = node.meta.get("val")
    return isinstance(out, torch.Tensor) and isinstance(want, torch.Tensor) and out.dtype == want.dtype \
        and out.shape == want.shape


def _only_feeds(src, copy: fx.Node, groups: dict, storage_of: dict) -> bool:
    """Whether `copy`'s result can be `src` itself: a computed tensor of the same type on a storage of its
    own, read by the copy alone. Anything else (an input, a view, a value read elsewhere) keeps the copy,
    or the graph would return an alias where eager returns a new tensor."""
    if not isinstance(src, fx.Node) or src.op != "call_function" or list(src.users) != [copy]:
        return False
    if src not in storage_of or len(groups[storage_of[src]]) != 1:
        return False
    a, b = copy.args[0].meta.get("val"), src.meta.get("val")
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape \
        and a.dtype == b.dtype and a.device == b.device
