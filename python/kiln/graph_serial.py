"""A captured core-ATen FX graph as plain JSON data and back (kiln.capture_cache stores them).

What kiln's later stages read is kept: each node's kind, name, target and arguments, and its value's type
(meta["val"]: each tensor's shape, strides, storage offset, dtype and device, made again as fake tensors on
load). Targets are ATen and prims op overloads, named, and operator.getitem; arguments are nodes, numbers,
strings, slices, dtypes, devices, layouts and memory formats, in lists and tuples. The tensor constants
tracing made (`torch.tensor(x)` in a model's forward) are kept by value up to 1024 elements. A graph holding
anything else (a larger constant, another callable, a symbolic size) has no data form: to_data returns None.
from_data raises ValueError on data it did not write."""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from kiln.fake_values import fake_tensor
from kiln.lazy_graph_module import lazy_graph_module
from kiln.torch_types import op_name

_NAMESPACES = ("aten", "prims")


def _name(value) -> str:
    """torch.float16 -> "float16", torch.channels_last -> "channels_last"."""
    return str(value).removeprefix("torch.")


_FORMATS = {_name(f): f for f in (torch.contiguous_format, torch.channels_last, torch.channels_last_3d,
                                  torch.preserve_format)}
_LAYOUTS = {_name(layout): layout for layout in (torch.strided, torch.sparse_coo)}
_CONSTANT_ELEMENTS = 1024


class _NoDataForm(Exception):
    pass


def to_data(gm: fx.GraphModule) -> dict | None:
    """`gm`'s graph as JSON-serializable data, or None when it holds something that has no data form."""
    index: dict[fx.Node, int] = {}
    nodes = []
    try:
        for node in gm.graph.nodes:
            if node.op not in ("placeholder", "get_attr", "call_function", "output"):
                return None
            index[node] = len(nodes)
            nodes.append({"op": node.op, "name": node.name,
                          "target": _target_name(node.target) if node.op == "call_function" else None,
                          "args": _arg(node.args, index), "kwargs": {k: _arg(v, index) for k, v in node.kwargs.items()},
                          "val": _value(node.meta.get("val")) if node.op != "output" else None})
            if node.op == "get_attr":
                nodes[-1]["target"], nodes[-1]["constant"] = node.target, _constant(getattr(gm, node.target, None))
    except _NoDataForm:
        return None
    return {"nodes": nodes}


def from_data(data: dict) -> fx.GraphModule:
    """The GraphModule `to_data` described, its values fake tensors of a new fake mode."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    graph = fx.Graph()
    root = torch.nn.Module()
    made: list[fx.Node] = []
    mode = FakeTensorMode()
    try:
        for spec in data["nodes"]:
            args, kwargs = _unarg(spec["args"], made), {k: _unarg(v, made) for k, v in spec["kwargs"].items()}
            if spec["op"] == "placeholder":
                node = graph.placeholder(spec["name"])
            elif spec["op"] == "get_attr":
                target = spec["target"]
                if not isinstance(target, str) or not target.isidentifier() or hasattr(root, target):
                    raise ValueError(f"constant name {target!r}")
                setattr(root, target, _unconstant(spec["constant"]))
                node = graph.get_attr(target)
            elif spec["op"] == "call_function":
                node = graph.create_node("call_function", _target(spec["target"]), args, kwargs, name=spec["name"])
            elif spec["op"] == "output":
                node = graph.output(args[0])
            else:
                raise ValueError(f"node kind {spec['op']!r}")
            if spec.get("val") is not None:
                node.meta["val"] = _unvalue(spec["val"], mode)
            made.append(node)
    except (KeyError, IndexError, TypeError, AttributeError, RuntimeError) as error:
        raise ValueError(f"not a captured graph ({type(error).__name__}: {error})") from error
    return lazy_graph_module(root, graph)


def _target_name(target) -> str:
    if target is operator.getitem:
        return "getitem"
    name = op_name(target) if isinstance(target, torch._ops.OpOverload) else None
    if name is None or name.split("::")[0] not in _NAMESPACES:
        raise _NoDataForm
    return name


def _target(name: str):
    if name == "getitem":
        return operator.getitem
    namespace, _, rest = name.partition("::")
    op, _, overload = rest.rpartition(".")
    if namespace not in _NAMESPACES or not op:
        raise ValueError(f"op {name!r}")
    target = getattr(getattr(getattr(torch.ops, namespace), op), overload)
    if not isinstance(target, torch._ops.OpOverload):
        raise ValueError(f"op {name!r}")
    return target


def _arg(a, index: dict):
    if a is None or type(a) in (bool, int, float, str):
        return a
    if isinstance(a, fx.Node):
        return {"node": index[a]}
    if isinstance(a, list):  # FX keeps arguments in immutable_list
        return [_arg(x, index) for x in a]
    if type(a) in (tuple, torch.Size):
        return {"tuple": [_arg(x, index) for x in a]}
    if type(a) is slice:
        return {"slice": [_arg(a.start, index), _arg(a.stop, index), _arg(a.step, index)]}
    if isinstance(a, torch.dtype):
        return {"dtype": _name(a)}
    if isinstance(a, torch.device):
        return {"device": str(a)}
    if isinstance(a, torch.layout) and _name(a) in _LAYOUTS:
        return {"layout": _name(a)}
    if isinstance(a, torch.memory_format) and _name(a) in _FORMATS:
        return {"memory_format": _name(a)}
    raise _NoDataForm


def _unarg(a, made: list):
    if a is None or type(a) in (bool, int, float, str):
        return a
    if type(a) is list:
        return [_unarg(x, made) for x in a]
    (kind, v), = a.items()
    if kind == "node":
        return made[v]
    if kind == "tuple":
        return tuple(_unarg(x, made) for x in v)
    if kind == "slice":
        return slice(*(_unarg(x, made) for x in v))
    if kind == "dtype":
        return _dtype(v)
    if kind == "device":
        return torch.device(v)
    if kind == "layout":
        return _LAYOUTS[v]
    if kind == "memory_format":
        return _FORMATS[v]
    raise ValueError(f"argument kind {kind!r}")


def _constant(t) -> dict:
    if type(t) is not torch.Tensor or t.requires_grad or t.is_complex() or t.numel() > _CONSTANT_ELEMENTS \
            or t.layout != torch.strided:
        raise _NoDataForm
    return {"dtype": _name(t.dtype), "shape": list(t.shape), "device": str(t.device),
            "values": t.tolist()}


def _unconstant(c: dict) -> torch.Tensor:
    return torch.tensor(c["values"], dtype=_dtype(c["dtype"]), device=c["device"]).reshape(c["shape"])


def _value(v):
    if v is None or type(v) in (bool, int, float):
        return v
    if isinstance(v, torch.Tensor):
        sizes = [*v.shape, *v.stride(), v.storage_offset()]
        if any(type(s) is not int for s in sizes):
            raise _NoDataForm  # symbolic
        return {"tensor": [list(v.shape), list(v.stride()), v.storage_offset(), _name(v.dtype), str(v.device)]}
    if isinstance(v, (list, tuple)):
        return {"values": [_value(x) for x in v], "tuple": isinstance(v, tuple)}
    raise _NoDataForm


def _unvalue(v, mode):
    if v is None or type(v) in (bool, int, float):
        return v
    if "tensor" in v:
        shape, stride, offset, dtype, device = v["tensor"]
        return fake_tensor(mode, shape, stride, offset, _dtype(dtype), device)
    values = [_unvalue(x, mode) for x in v["values"]]
    return tuple(values) if v["tuple"] else values


def _dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"dtype {name!r}")
    return dtype
