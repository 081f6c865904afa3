"""torch.compile(model, backend="kiln"): registered through the
`torch_dynamo_backends` entry point, so no import of kiln is needed.

Dynamo's graph becomes a core ATen inference graph (in one trace by
kiln.aten_capture where it can, kept by kiln.capture_cache for the next
compile of the same graph; else through aot_autograd), is partitioned
into kiln regions and PyTorch fallback nodes, and each region is
compiled into a kiln Executable. With torch's caching precompile on, the
captured graph is also recorded as kiln's artifact (kiln.precompile).
Inference only: when autograd would need to record the graph (grad enabled
and an input requiring grad) kiln warns once and runs the graph in eager
mode, so training code still works unchanged."""

from __future__ import annotations

import functools
import logging
import re
import warnings
import weakref

import torch

from kiln.decompositions import decomposition_table
from kiln.options import Options

log = logging.getLogger("kiln")

_GRAD_WARNING = (
    "kiln compiles inference graphs only: this graph runs with grad enabled and inputs that require grad, "
    "so it runs in eager PyTorch. Wrap calls in torch.no_grad() or torch.inference_mode() to use kiln."
)


def _is_weight(node, tensor) -> bool:
    if isinstance(tensor, torch.nn.Parameter):
        return True
    grapharg = node.meta.get("grapharg")
    source = getattr(grapharg, "source", None)
    name = getattr(source, "name", node.name) if source is not None else node.name
    name = name() if callable(name) else name
    return "_buffers" in name or "_parameters" in name  # Dynamo sources and placeholder names alike


def _weight_name(node) -> str:
    """The model's name for a weight placeholder ("0.weight"), from Dynamo's source when there is one."""
    source = getattr(node.meta.get("grapharg"), "source", None)
    name = getattr(source, "name", None) if source is not None else None
    name = name() if callable(name) else name
    if not isinstance(name, str):
        return node.name
    name = re.sub(r"\._(?:modules|parameters|buffers)\['([^']*)'\]", r".\1", name)
    # The compiled module itself is the local `self` (a method) or `fn` (torch.compile of a module).
    return re.sub(r"^L\['(?:self|fn)'\]\.?|^L\['([^']*)'\]", lambda m: m.group(1) or "", name) or node.name


def warn_grad() -> None:
    warnings.warn(_GRAD_WARNING, stacklevel=3)


def _device_of(example_inputs, options: Options) -> torch.device:
    if options.device is not None:
        return torch.device(options.device)
    for t in example_inputs:
        if isinstance(t, torch.Tensor):
            return t.device
    return torch.device("cpu")


def kiln_backend(gm: torch.fx.GraphModule, example_inputs, options=None, reports=None, **kwargs):
    """The Dynamo backend. `options` is torch.compile's options dict."""
    opts = Options.from_user(options, **kwargs)
    needs_grad = any(isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs)
    if torch.is_grad_enabled() and needs_grad:
        warn_grad()
        return gm.forward

    from torch._dynamo.backends.common import aot_autograd

    from kiln.capture_cache import capture

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    weight_flags = [_is_weight(n, t) for n, t in zip(placeholders, example_inputs)]
    names = [_weight_name(n) if w else n.name for n, w in zip(placeholders, weight_flags)]
    device = _device_of(example_inputs, opts)
    compiler = functools.partial(compile_aten, weight_flags=weight_flags, device=device, options=opts, reports=reports,
                                 weight_refs=weight_refs(example_inputs, weight_flags, names))
    aten, why = capture(gm, example_inputs)
    if aten is not None:
        if getattr(torch._dynamo.config, "caching_precompile", False):  # (kiln.precompile needs torch's module)
            from kiln import precompile

            precompile.record(gm, aten, why, weight_flags, names, device, opts)
        return compiler(aten, capture=why)
    boxed = functools.partial(_boxed, functools.partial(compiler, capture=f"aot_autograd ({why})"))
    return aot_autograd(fw_compiler=boxed, decompositions=decomposition_table())(gm, example_inputs)


def weight_refs(inputs, weight_flags, names) -> list:
    """The real weights among `inputs`, held weakly with their names, for the weight registry (a captured graph
    sees fake ones); None for the other inputs."""
    return [(weakref.ref(t), name) if w and isinstance(t, torch.Tensor) else None
            for t, w, name in zip(inputs, weight_flags, names)]


def _boxed(compiler, gm: torch.fx.GraphModule, example_inputs):
    """aot_autograd's compiler: its compiled functions take one list of inputs (the boxed convention)."""
    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(compiler(gm))


def compile_aten(gm: torch.fx.GraphModule, *, weight_flags, device, options, reports, weight_refs, capture):
    """A core ATen graph, inputs in Dynamo's order, to the function that runs it; `capture` says how the
    graph was captured, for the report."""
    from kiln.compile_fx import compile_fx_graph
    from kiln.direct_call import direct_call

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    # Both captures keep Dynamo's inputs in order (the GraphModule owns no parameters).
    weights = {n.name for n, w in zip(placeholders, weight_flags) if w}
    weight_tensors, weight_names = {}, {}
    for n, ref in zip(placeholders, weight_refs):
        t = ref[0]() if ref is not None else None
        if t is not None and not isinstance(t, torch._subclasses.FakeTensor):
            weight_tensors[n.name], weight_names[n.name] = t, ref[1]
    compiled, report = compile_fx_graph(gm, weights, device, options, weight_tensors, weight_names)
    report.capture = capture
    del weight_tensors
    if reports is not None:
        reports.append(report)
    if options.verbose:
        log.warning("%s", report)
    return direct_call(compiled) or compiled
