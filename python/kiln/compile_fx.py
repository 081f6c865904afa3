"""Compile one core-ATen FX graph: partition, prepare each kiln region's
folded constants and precision (kiln.folding), compile it, and return a
callable GraphModule where regions run in kiln and the rest in torch. The
graph's weights join the weight registry (kiln.graph_weights). Memory is
recorded at each stage (kiln.memory_trace)."""

from __future__ import annotations

import itertools
import time
import weakref

import torch
import torch.fx as fx

from kiln.executable import compile_graph, torch_math
from kiln.folding import prepare
from kiln.fx_constants import inline_small_constants
from kiln.fx_rewrites import rewrite_as_strided_views
from kiln.gc_pause import gc_paused
from kiln.graph_weights import attach as attach_weights
from kiln.memory_trace import log_trace, new_trace
from kiln.options import Options
from kiln.partition import partition, region_input_names
from kiln.region import KilnRegion
from kiln.report import GraphReport
from kiln.specialize import ShapeSpecialized, has_symbolic_shapes

_graph_ids = itertools.count()


def compile_fx_graph(gm: fx.GraphModule, weights: set[str], device: torch.device, options: Options,
                     weight_tensors: dict[str, torch.Tensor] | None = None, weight_names: dict[str, str] | None = None):
    """`weight_tensors` (placeholder name -> the real tensor) joins the graph to the weight registry
    (kiln.graph_weights: shared constants, donation); `weight_names` names them in errors."""
    with gc_paused():
        return _compile(gm, weights, device, options, weight_tensors, weight_names)


def _compile(gm: fx.GraphModule, weights: set[str], device: torch.device, options: Options,
             weight_tensors: dict[str, torch.Tensor] | None, weight_names: dict[str, str] | None):
    if has_symbolic_shapes(gm):
        # Symbolic sizes (dynamic=True, automatic dynamic): compiled per input shapes (kiln.specialize).
        examples = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
        # Later specializations see the weights weakly: a compiled graph must not keep the model's tensors.
        weak = None if weight_tensors is None else {k: weakref.ref(t) for k, t in weight_tensors.items()}
        module = ShapeSpecialized(gm, lambda g: compile_fx_graph(g, weights, device, options, _alive(weak), weight_names))
        return module, module.add(examples)
    start = time.perf_counter()
    trace = new_trace(f"graph {next(_graph_ids)}", str(device))
    rewrite_as_strided_views(gm)
    inline_small_constants(gm, device)
    parts = partition(gm, weights, device.type)
    trace.record("import")
    module = parts.module
    prepared = [(name, graph, args, prepare(graph, options, device)) for name, (graph, args) in parts.regions.items()]
    trace.record("plan")
    region_reports, region_modules, region_args = [], [], []
    math = torch_math() if device.type == "cuda" else {}  # TF32 as torch allows it, read at compile time
    for name, graph, args, folds in prepared:
        exe = compile_graph(graph, device=str(device), cuda_graphs=options.cuda_graphs,
                            new_addresses=options.cuda_graph_new_addresses, **math)
        arg_is_weight = [a.name in weights or a.op == "get_attr" for a in args]
        keys = [n if w else None for n, w in zip(region_input_names(getattr(module, name)), arg_is_weight)]
        region = KilnRegion(exe, arg_is_weight, keys, device, folds=folds, trace=trace, name=name)
        setattr(module, name, region)
        region_modules.append(region)
        region_args.append((region, args))
        region_reports.append((name, graph.op_counts(), exe.arena_bytes()))
    module.recompile()
    if weight_tensors is not None:
        attach_weights(module, region_args, weight_tensors, weight_names or {}, options)
    trace.record("lower", _kiln_bytes(region_modules))
    _record_after_first_call(module, trace, region_modules, options)
    report = GraphReport(parts.decisions, region_reports, time.perf_counter() - start, region_modules, memory=trace)
    # torch.fx makes a GraphModule cyclic (module -> graph -> module), which would leave a dropped compiled
    # model's executables, and their device memory, to Python's cycle collector. The graph is final here
    # (only graph edits read its owning module), so reference counting frees them when the model goes.
    module.graph.owning_module = None
    return module, report


def _alive(weak: dict | None) -> dict | None:
    if weak is None:
        return None
    return {k: t for k, t in ((k, r()) for k, r in weak.items()) if t is not None}


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
