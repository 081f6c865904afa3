"""kiln.compile(model, example_inputs): ahead-of-time compilation through
torch.export. The exported program's parameters, buffers and constants are
bound by pointer to the model's own tensors (looked up on each call, so an
in-place update or a replaced .data is seen); user inputs are activations."""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree

from kiln.compile_fx import compile_fx_graph
from kiln.decompositions import decomposition_table
from kiln.options import Options


class CompiledProgram:
    """A callable with the model's signature (positional tensors), running kiln regions and torch fallbacks."""

    def __init__(self, module, weight_sources, num_user_inputs, out_spec, report, weight_names=None):
        self.module = module
        self.weight_sources = weight_sources
        self.weight_names = weight_names  # the model's name for each weight source ("fc1.weight"), for kiln.save
        self.num_user_inputs = num_user_inputs
        self.out_spec = out_spec
        self.report = report

    def __call__(self, *inputs):
        if len(inputs) != self.num_user_inputs:
            raise TypeError(f"kiln compiled program takes {self.num_user_inputs} inputs, got {len(inputs)}")
        with torch.no_grad():
            flat = self.module(*[source() for source in self.weight_sources], *inputs)
        return pytree.tree_unflatten(list(flat), self.out_spec)


def _source(model, ep, kind: str, target: str):
    if kind == "parameter":
        return lambda: model.get_parameter(target)
    if kind == "buffer":
        return lambda: model.get_buffer(target)
    constant = ep.constants[target]
    return lambda: constant


def compile_exported(model: torch.nn.Module, example_inputs: tuple, options: Options) -> CompiledProgram:
    with torch.no_grad():
        ep = torch.export.export(model, example_inputs)
        ep = ep.run_decompositions(decomposition_table())
    sig = ep.graph_signature
    kinds = {}
    kinds.update({k: ("parameter", v) for k, v in sig.inputs_to_parameters.items()})
    kinds.update({k: ("buffer", v) for k, v in sig.inputs_to_buffers.items()})
    kinds.update({k: ("constant", v) for k, v in sig.inputs_to_lifted_tensor_constants.items()})
    placeholders = [n.name for n in ep.graph_module.graph.nodes if n.op == "placeholder"]
    sources = [_source(model, ep, *kinds[name]) for name in placeholders if name in kinds]
    if placeholders[: len(sources)] != [name for name in placeholders if name in kinds]:
        raise RuntimeError("kiln: torch.export placed weights after user inputs; this layout is not supported")
    devices = {t.device for t in example_inputs if isinstance(t, torch.Tensor)}
    device = torch.device(options.device) if options.device else (devices.pop() if len(devices) == 1 else torch.device("cpu"))
    module, report = compile_fx_graph(ep.graph_module, set(kinds), device, options)
    names = [kinds[name][1] for name in placeholders if name in kinds]
    return CompiledProgram(module, sources, len(placeholders) - len(sources), ep.call_spec.out_spec, report, names)
