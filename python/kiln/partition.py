"""Partition an ATen FX graph into kiln regions and PyTorch fallback nodes.

Nodes kiln can take (an ATen adapter exists, tensors on the target device in
supported dtypes) are grouped by torch's capability-based partitioner into
regions (or, when kiln takes every node, into one region built directly);
each region is imported into a kiln Graph. A node whose import fails is
marked as a fallback with the reason and the partition is redone, so the
final graph always runs, and every decision is recorded for kiln.explain."""

from __future__ import annotations

import dataclasses
import operator

import torch
import torch.fx as fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from kiln import _kiln
from kiln.fx_import import ImportFailure, import_graph, import_nodes
from kiln.lazy_graph_module import lazy_graph_module
from kiln.torch_types import aten_name, kiln_dtype_name


@dataclasses.dataclass
class NodeDecision:
    node: str
    target: str
    lowered: bool
    reason: str = ""


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)


def _used_outputs(node: fx.Node):
    """node's result; of several outputs only those a getitem reads (SDPA's unused RNG state may be u64 or on the CPU)."""
    val = node.meta.get("val")
    if not isinstance(val, (list, tuple)) or any(u.target is not operator.getitem for u in node.users):
        return val
    return [val[u.args[1]] for u in node.users]


def static_reason(node: fx.Node, device_type: str) -> str | None:
    """Why kiln cannot take `node` without trying to import it; None if it may."""
    if node.op != "call_function":
        return f"FX node kind '{node.op}'"
    if node.target is operator.getitem:
        return None
    target = aten_name(node.target)
    if target is None:
        return f"{getattr(node.target, '__name__', node.target)} is not an ATen op"
    if not _kiln.has_aten(target):
        return f"no kiln lowering for {target}"
    if device_type == "cuda" and not _kiln.has_cuda():
        return f"kiln's CUDA backend is unavailable: {_kiln.cuda_unavailable_reason()}"
    vals = [a.meta.get("val") for a in node.all_input_nodes] + [_used_outputs(node)]
    for t in _tensors(vals):
        if t.device.type != device_type:
            return f"tensor on {t.device}, region device is {device_type}"
        if kiln_dtype_name(t.dtype) is None:
            return f"dtype {t.dtype} is not supported"
    return None


class _Support(OperatorSupportBase):
    def __init__(self, device_type: str, rejected: dict[str, str]):
        self.device_type = device_type
        self.rejected = rejected

    def is_node_supported(self, submodules, node: fx.Node) -> bool:
        if node.name in self.rejected:
            return False
        if node.op == "call_function" and node.target is operator.getitem:
            source = node.args[0]
            return isinstance(source, fx.Node) and self.is_node_supported(submodules, source)
        return static_reason(node, self.device_type) is None


def _copy_module(gm: fx.GraphModule) -> fx.GraphModule:
    graph = fx.Graph()
    out = graph.graph_copy(gm.graph, {})
    graph.output(out)
    return lazy_graph_module(gm, graph)


@dataclasses.dataclass
class Partitioned:
    module: fx.GraphModule  # regions replaced by call_module nodes
    regions: dict[str, tuple[_kiln.Graph, list[fx.Node]]]  # submodule name -> kiln graph, outer arg nodes
    decisions: list[NodeDecision]


def partition(gm: fx.GraphModule, weights: set[str], device_type: str) -> Partitioned:
    """`weights` names the placeholders (and get_attr nodes) of `gm` that are weights."""
    rejected: dict[str, str] = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is not operator.getitem:
            reason = static_reason(node, device_type)
            if reason is not None:
                rejected[node.name] = reason
    if not rejected:
        fused = _whole_graph_region(gm)
        if fused is not None:
            try:
                return Partitioned(fused, _import_regions(fused, weights, device_type), _decisions(gm, rejected))
            except ImportFailure as failure:
                rejected[failure.node.name] = failure.reason
    for _ in range(len(gm.graph.nodes) + 1):
        work = _copy_module(gm)
        partitioner = CapabilityBasedPartitioner(
            work, _Support(device_type, rejected), allows_single_node_partition=True
        )
        fused = partitioner.fuse_partitions(partitioner.propose_partitions())
        try:
            regions = _import_regions(fused, weights, device_type)
        except ImportFailure as failure:
            rejected[failure.node.name] = failure.reason
            continue
        return Partitioned(fused, regions, _decisions(gm, rejected))
    raise RuntimeError("kiln: partitioning did not converge")


def _whole_graph_region(gm: fx.GraphModule) -> fx.GraphModule | None:
    """What the partitioner makes of a graph whose every node kiln takes: one region ("fused_0") of all
    of its call_function nodes, with the graph inputs they read as arguments in graph order, returning
    the values the graph's output reads (a tuple unless there is one). Built directly: the capability
    partitioner's cost grows faster than the graph (a third of BERT's import). None when the graph
    holds another kind of node or its output reads nothing the region computes."""
    nodes = [n for n in gm.graph.nodes if n.op not in ("placeholder", "get_attr", "output")]
    if not nodes or any(n.op != "call_function" for n in nodes):
        return None
    inner = set(nodes)
    output = next(n for n in gm.graph.nodes if n.op == "output")
    results = [n for n in dict.fromkeys(output.all_input_nodes) if n in inner]
    if not results:
        return None
    inputs = [n for n in gm.graph.nodes if n.op in ("placeholder", "get_attr") and any(u in inner for u in n.users)]
    outer, outer_env, attributes = fx.Graph(), {}, {}
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "get_attr"):
            outer_env[n] = outer.node_copy(n, outer_env.__getitem__)
            if n.op == "get_attr":
                attributes[n.target] = getattr(gm, n.target)
    call = outer.call_module("fused_0", tuple(outer_env[a] for a in inputs))
    if len(results) == 1:
        outer_env[results[0]] = call
    else:
        for i, r in enumerate(results):
            outer_env[r] = outer.call_function(operator.getitem, (call, i))
    outer.output(fx.map_arg(output.args[0], outer_env.__getitem__))
    return lazy_graph_module({**attributes, "fused_0": _RegionNodes(inputs, nodes, results, output)}, outer)


class _RegionNodes(torch.nn.Module):
    """The whole graph's region as the nodes of that graph, read in place: neither copied into a graph of
    its own (a third of a 12-layer LLaMA decoding step's partition) nor given the Python code a
    GraphModule would generate (BERT's took 0.16 s to compile). compile_fx replaces it with a KilnRegion
    before the module ever runs."""

    def __init__(self, inputs: list[fx.Node], nodes: list[fx.Node], results: list[fx.Node], output: fx.Node):
        super().__init__()
        self.inputs, self.nodes, self.results, self.output = inputs, nodes, results, output


def region_input_names(region: torch.nn.Module) -> list[str]:
    """The names a region's inputs have inside it, in call order (its weights are keyed by them)."""
    if isinstance(region, _RegionNodes):
        return [n.name for n in region.inputs]
    return [n.name for n in region.graph.nodes if n.op == "placeholder"]


def _import_regions(fused: fx.GraphModule, weights: set[str], device_type: str):
    regions = {}
    for node in fused.graph.nodes:
        if node.op != "call_module" or not node.target.startswith("fused_"):
            continue
        sub = getattr(fused, node.target)
        region_weights = {name for name, arg in zip(region_input_names(sub), node.args)
                          if arg.name in weights or arg.op == "get_attr"}
        if isinstance(sub, _RegionNodes):
            graph = import_nodes(sub.inputs, sub.nodes, sub.results, region_weights, device_type, sub.output)
        else:
            for ph, arg in zip((n for n in sub.graph.nodes if n.op == "placeholder"), node.args):
                ph.meta["val"] = arg.meta.get("val")
            graph = import_graph(sub, region_weights, device_type)
        regions[node.target] = (graph, list(node.args))
    return regions


def _decisions(gm: fx.GraphModule, rejected: dict[str, str]) -> list[NodeDecision]:
    out = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        target = aten_name(node.target) or str(node.target)
        out.append(NodeDecision(node.name, target, node.name not in rejected, rejected.get(node.name, "")))
    return out
