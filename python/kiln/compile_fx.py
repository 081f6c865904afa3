"""Compile one core-ATen FX graph: partition, prepare each kiln region's
folded constants and precision (kiln.folding), compile it, and return a
callable GraphModule where regions run in kiln and the rest in torch. Memory
is recorded at each stage (kiln.memory_trace)."""

from __future__ import annotations

import itertools
import time

import torch
import torch.fx as fx

from kiln.executable import compile_graph
from kiln.folding import prepare
from kiln.memory_trace import log_trace, new_trace
from kiln.options import Options
from kiln.partition import partition
from kiln.region import KilnRegion
from kiln.report import GraphReport

_graph_ids = itertools.count()


def compile_fx_graph(gm: fx.GraphModule, weights: set[str], device: torch.device, options: Options):
    start = time.perf_counter()
    trace = new_trace(f"graph {next(_graph_ids)}", str(device))
    parts = partition(gm, weights, device.type)
    trace.record("import")
    module = parts.module
    region_reports, region_modules = [], []
    for name, (graph, args) in parts.regions.items():
        folds = prepare(graph, options)
        exe = compile_graph(graph, device=str(device))
        arg_is_weight = [a.name in weights or a.op == "get_attr" for a in args]
        placeholders = [n for n in getattr(module, name).graph.nodes if n.op == "placeholder"]
        keys = [ph.name if w else None for ph, w in zip(placeholders, arg_is_weight)]
        region = KilnRegion(exe, arg_is_weight, keys, device, folds=folds, trace=trace, name=name)
        setattr(module, name, region)
        region_modules.append(region)
        region_reports.append((name, graph.op_counts(), exe.arena_bytes()))
    module.recompile()
    trace.record("lower", _kiln_bytes(region_modules))
    _record_after_first_call(module, trace, region_modules, options)
    report = GraphReport(parts.decisions, region_reports, time.perf_counter() - start, region_modules, memory=trace)
    return module, report


def _kiln_bytes(regions) -> int:
    return sum(r.kiln_bytes() for r in regions)


def _record_after_first_call(module: torch.nn.Module, trace, regions, options: Options) -> None:
    """Records the "after" stage when the compiled graph's first call returns."""

    def hook(_module, _args, _output):
        handle.remove()
        trace.record("after", _kiln_bytes(regions))
        if options.verbose:
            log_trace(trace)

    handle = module.register_forward_hook(hook)
