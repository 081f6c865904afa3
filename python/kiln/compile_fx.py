"""Compile one core-ATen FX graph: partition, compile each kiln region, and
return a callable GraphModule where regions run in kiln and the rest in torch."""

from __future__ import annotations

import time

import torch
import torch.fx as fx

from kiln.executable import compile_graph
from kiln.options import Options
from kiln.partition import partition
from kiln.region import KilnRegion
from kiln.report import GraphReport


def compile_fx_graph(gm: fx.GraphModule, weights: set[str], device: torch.device, options: Options):
    start = time.perf_counter()
    parts = partition(gm, weights, device.type)
    module = parts.module
    region_reports, region_modules = [], []
    for name, (graph, args) in parts.regions.items():
        graph = _apply_precision(graph, options)
        exe = compile_graph(graph, device=str(device))
        arg_is_weight = [a.name in weights or a.op == "get_attr" for a in args]
        placeholders = [n for n in getattr(module, name).graph.nodes if n.op == "placeholder"]
        keys = [ph.name if w else None for ph, w in zip(placeholders, arg_is_weight)]
        region = KilnRegion(exe, arg_is_weight, keys, device)
        setattr(module, name, region)
        region_modules.append(region)
        region_reports.append((name, graph.op_counts(), exe.arena_bytes()))
    module.recompile()
    report = GraphReport(parts.decisions, region_reports, time.perf_counter() - start, region_modules)
    return module, report


def _apply_precision(graph, options: Options):
    if options.precision != "keep":
        raise NotImplementedError(
            f"kiln option precision={options.precision!r} needs weight folding, which is not built yet; use 'keep'"
        )
    return graph
