"""FX (core ATen) graph -> kiln Graph. Thin on purpose: walk the nodes, pass
each ATen call's arguments by schema name to the C++ builder, and check that
kiln's inferred types agree with torch's. No op semantics live here."""

from __future__ import annotations

import functools
import operator

import torch
import torch.fx as fx

from kiln._kiln import Error, Graph
from kiln.torch_types import TORCH_TO_KILN, aten_name, kiln_dtype_name


class ImportFailure(Exception):
    """A node kiln cannot take: `node` is the FX node, `reason` says why."""

    def __init__(self, node: fx.Node, reason: str):
        super().__init__(f"{node.name}: {reason}")
        self.node = node
        self.reason = reason


def tensor_meta(node: fx.Node):
    val = node.meta.get("val")
    return val if isinstance(val, torch.Tensor) else None


def _type_of(node: fx.Node):
    val = tensor_meta(node)
    if val is None:
        raise ImportFailure(node, "has no tensor metadata")
    name = kiln_dtype_name(val.dtype)
    if name is None:
        raise ImportFailure(node, f"dtype {val.dtype} is not supported by kiln")
    return name, [int(s) for s in val.shape], [int(s) for s in val.stride()]


def _convert_arg(value, env, node: fx.Node):
    if isinstance(value, fx.Node):
        got = env[value]
        if got is None:
            raise ImportFailure(node, f"uses {value.name}, which kiln does not produce")
        return got
    if isinstance(value, (list, tuple)):
        return [_convert_arg(v, env, node) for v in value]
    if isinstance(value, torch.dtype):
        if value not in TORCH_TO_KILN:
            raise ImportFailure(node, f"dtype {value} is not supported by kiln")
        return TORCH_TO_KILN[value]
    if isinstance(value, (torch.device, torch.layout, torch.memory_format)):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ImportFailure(node, f"argument of type {type(value).__name__} is not supported")


@functools.cache
def _schema_arguments(target) -> tuple:
    """(name, kwarg_only, default) of each of an overload's arguments, read once: the schema's Argument
    objects are made anew on every access (about half of importing a node)."""
    return tuple((a.name, a.kwarg_only, a.default_value if a.has_default_value() else None)
                 for a in target._schema.arguments)


def schema_args(node: fx.Node, env) -> dict:
    """The node's arguments by schema name (defaults filled in), fx nodes replaced by kiln values."""
    out = {}
    args, kwargs = node.args, node.kwargs
    for i, (name, kwarg_only, default) in enumerate(_schema_arguments(node.target)):
        if i < len(args) and not kwarg_only:
            value = args[i]
        elif name in kwargs:
            value = kwargs[name]
        else:
            value = default
        out[name] = _convert_arg(value, env, node)
    return out


def _check_types(node: fx.Node, outs) -> None:
    val = node.meta.get("val")
    vals = list(val) if isinstance(val, (list, tuple)) else [val]
    for kiln_value, torch_value in zip(outs, vals):
        if kiln_value is None or not isinstance(torch_value, torch.Tensor):
            continue
        want = (kiln_dtype_name(torch_value.dtype), [int(s) for s in torch_value.shape])
        got = (kiln_value.dtype, list(kiln_value.shape))
        if want != got:
            raise ImportFailure(node, f"kiln infers {got[0]}{got[1]} but torch gives {want[0]}{want[1]}")


def contiguous_strides(shape):
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return list(reversed(strides))


def import_graph(gm: fx.GraphModule, weights: set[str], device: str = "cpu") -> Graph:
    """Builds a kiln Graph from `gm`; placeholders named in `weights` become
    weights (bound by pointer), the others inputs. Raises ImportFailure, also
    for a node whose kiln ops `device`'s backend has no kernel for."""
    nodes = list(gm.graph.nodes)
    inputs = [n for n in nodes if n.op == "placeholder"]
    output = [n for n in nodes if n.op == "output"]
    results = output[0].args[0] if output else []
    results = list(results) if isinstance(results, (list, tuple)) else [results]
    return import_nodes(inputs, [n for n in nodes if n.op not in ("placeholder", "output")], results, weights, device,
                        output[0] if output else None)


def import_nodes(inputs: list[fx.Node], nodes: list[fx.Node], results: list, weights: set[str], device: str = "cpu",
                 output: fx.Node | None = None) -> Graph:
    """import_graph over part of a graph, read in place: `inputs` (placeholder or get_attr nodes) become
    the kiln graph's inputs and weights (by name, as import_graph's placeholders), `nodes` (in order) its
    nodes, and `results` its outputs. `output` is the node named when a result is not kiln's."""
    g = Graph()
    g.set_eager_device(device)  # numbers in arithmetic read as torch's kernels there read them
    env: dict[fx.Node, object] = {}
    for node in inputs:
        dtype, shape, strides = _type_of(node)
        if node.name in weights:
            env[node] = g.weight(node.name, dtype, shape, strides, key=node.name)
        else:
            # An activation that aliases itself (a stride-0, expanded layout)
            # is planned contiguous; the region copies it in (region.py).
            if any(st == 0 and d > 1 for st, d in zip(strides, shape)):
                strides = contiguous_strides(shape)
            env[node] = g.input(node.name, dtype, shape, strides)
    for node in nodes:
        if node.op == "call_function" and node.target is operator.getitem:
            source, index = node.args
            got = env[source]
            env[node] = got[index] if isinstance(got, list) else None
            if env[node] is None:
                raise ImportFailure(source, f"output {index} of {source.name} is not produced by kiln")  # the producer falls back
        elif node.op == "call_function":
            target = aten_name(node.target)
            if target is None:
                raise ImportFailure(node, f"{node.target} is not an ATen op")
            first = g.num_nodes()
            try:
                outs = g.aten(target, schema_args(node, env), node.name)
                missing = g.unsupported_since(first, device)
            except Error as e:
                raise ImportFailure(node, str(e)) from None
            if missing is not None:
                raise ImportFailure(node, f"no {device} kernel: {missing}")
            _check_types(node, outs)
            returns = node.target._schema.returns
            # One Tensor return is the value itself; several returns or one Tensor[] return (split, unbind) stay a list.
            single = len(returns) == 1 and not isinstance(returns[0].type, torch.ListType)
            env[node] = outs[0] if single else outs
        else:
            raise ImportFailure(node, f"FX node kind '{node.op}' is not supported")
    values = []
    for r in results:
        if not isinstance(r, fx.Node) or env.get(r) is None or isinstance(env[r], list):
            raise ImportFailure(output if output is not None else r, f"output {r} is not a kiln tensor")
        values.append(env[r])
    g.set_outputs(values)
    return g
