"""Dynamo's graph to a core ATen inference graph in one trace.

aot_autograd traces every graph twice: a first pass over fake tensors learns
what the graph mutates and which outputs alias its inputs, then a second pass
captures the graph. An inference graph that mutates none of its inputs and
returns no output aliasing an input or another output needs nothing the first
pass finds, so kiln captures it once itself, decomposed with the same table,
dead code removed: a plain trace whose in-place ops on intermediates are made
functional (kiln.in_place) where that is exact, else a functionalized trace.
Either is aot_autograd's graph node for node (checked on GPT-2, BERT,
ResNet-50 and ViT-B/16; tests/python/test_aten_capture.py and test_in_place.py
check blocks of their ops). The functionalized trace took 0.21-0.25 s less
than aot_autograd on those four models, and the plain one another 0.15-0.22 s
on the dev CPU (`bench/compile_time.py --compare-capture`, docs/benchmarks.md).
A graph with symbolic shapes (Dynamo's sizes as SymInt inputs, its own fake
tensors for the tensors) is traced the same way, over Dynamo's shape
environment: the sizes stay symbols, as in aot_autograd's graph.

Everything else returns None and goes through aot_autograd as before: an
input mutated in data, metadata or storage (a buffer updated in place), an
output that aliases an input or another output, inputs that are neither plain
tensors nor sizes, a GraphModule holding parameters, buffers or submodules,
higher-order ops, or any error while tracing."""

from __future__ import annotations

import logging

import torch
import torch.fx as fx

from kiln.in_place import INPUT_MUTATION, functionalize_in_place, needs_functionalization

log = logging.getLogger("kiln")


class _NeedsAotAutograd(Exception):
    """The traced graph does something only aot_autograd's two-pass capture handles."""


def capture_inference_graph(gm: fx.GraphModule, example_inputs, decompositions,
                            plain: bool = True) -> tuple[fx.GraphModule | None, str]:
    """The core ATen graph of `gm` for inference, inputs in Dynamo's order, and how it was captured ("one
    trace" or "one functionalized trace"); or None and why the graph needs aot_autograd (see above).
    `plain=False` skips the plain trace (bench/compile_time.py --compare-capture times both)."""
    reason = _unsupported(gm, example_inputs)
    if reason is None:
        try:
            return _trace(gm, example_inputs, decompositions, plain)
        except _NeedsAotAutograd as need:
            reason = str(need)
        except Exception as error:  # noqa: BLE001 - aot_autograd then traces it (and reports a real error)
            reason = f"{type(error).__name__} while tracing: {error}"
    log.debug("kiln: graph captured through aot_autograd: %s", reason)
    return None, reason


def _unsupported(gm: fx.GraphModule, example_inputs) -> str | None:
    if any(type(t) not in (torch.Tensor, torch.nn.Parameter, torch.SymInt, int) for t in example_inputs):
        return "an input is neither a plain tensor nor a size"
    if next(gm.parameters(), None) is not None or next(gm.buffers(), None) is not None:
        return "the GraphModule holds parameters or buffers"
    for node in gm.graph.nodes:
        if node.op in ("get_attr", "call_module"):
            return f"{node.op} node {node.name}"
        if node.op == "call_function" and isinstance(node.target, torch._ops.HigherOrderOperator):
            return f"higher-order op {node.target}"
    return None


def _trace(gm: fx.GraphModule, example_inputs, decompositions, plain: bool) -> tuple[fx.GraphModule, str]:
    from torch._dispatch.python import enable_python_dispatcher
    from torch._guards import detect_fake_mode
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch._subclasses.functional_tensor import FunctionalTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    fake_mode = detect_fake_mode(example_inputs) or FakeTensorMode()
    # Dynamo's own fakes for its real inputs (symbolic sizes included); its sizes as they are.
    fakes = [fake_mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in example_inputs]
    # The graph may switch grad mode (Dynamo records `with torch.enable_grad()` as calls): restored after,
    # an error midway included.
    with torch.set_grad_enabled(torch.is_grad_enabled()), enable_python_dispatcher(), fake_mode:
        if plain and not needs_functionalization(gm):
            graph = make_fx(_plain_forward(gm), decomposition_table=decompositions)(*fakes)
            why = functionalize_in_place(graph, decompositions)
            if why is None:
                return _finish(graph), "one trace"
            if why == INPUT_MUTATION:
                raise _NeedsAotAutograd(why)
            log.debug("kiln: a functionalized trace, as %s", why)
        functional = FunctionalTensorMode(pre_dispatch=False, export=False, _allow_token_discovery=False)
        with functional:
            graph = make_fx(_functional_forward(gm), decomposition_table=decompositions)(*fakes)
    return _finish(graph), "one functionalized trace"


def _finish(graph: fx.GraphModule) -> fx.GraphModule:
    graph.graph.eliminate_dead_code()
    graph.recompile()
    return graph


def _checked_outputs(outputs, inputs, tensor_type) -> list:
    """`outputs` as a list; raises _NeedsAotAutograd when one is not a `tensor_type` or shares a storage with
    an input or another output."""
    from torch.multiprocessing.reductions import StorageWeakRef

    if not isinstance(outputs, (tuple, list)) or not all(isinstance(o, tensor_type) for o in outputs):
        raise _NeedsAotAutograd("an output is not a tensor")
    storages = [StorageWeakRef(t.untyped_storage()) for t in inputs if isinstance(t, torch.Tensor)]
    for o in outputs:
        storage = StorageWeakRef(o.untyped_storage())
        if storage in storages:
            raise _NeedsAotAutograd("an output aliases an input or another output")
        storages.append(storage)
    return list(outputs)


def _plain_forward(gm: fx.GraphModule):
    """`gm`'s forward returning its outputs as a list, for a trace without functionalization."""

    def forward(*inputs):
        return _checked_outputs(fx.Interpreter(gm).run(*inputs), inputs, torch.Tensor)

    return forward


def _functional_forward(gm: fx.GraphModule):
    """`gm`'s forward over functional wrappers of its inputs, returning its outputs unwrapped; raises
    _NeedsAotAutograd when it mutates an input or returns aliases."""
    from torch._subclasses.functional_tensor import FunctionalTensor

    def forward(*inputs):
        wrapped = [FunctionalTensor.to_functional(t) if isinstance(t, torch.Tensor) else t for t in inputs]
        outputs = fx.Interpreter(gm).run(*wrapped)
        for before, f in zip(inputs, wrapped):
            if not isinstance(f, FunctionalTensor):  # a size
                continue
            torch._sync(f)
            after = torch._from_functional_tensor(f.elem)
            if torch._functionalize_has_data_mutation(f.elem) or torch._functionalize_was_storage_changed(f.elem) \
                    or after.shape != before.shape or after.stride() != before.stride() \
                    or after.storage_offset() != before.storage_offset():
                raise _NeedsAotAutograd(INPUT_MUTATION)
        unwrapped = []
        for o in _checked_outputs(outputs, wrapped, FunctionalTensor):
            torch._sync(o)
            unwrapped.append(torch._from_functional_tensor(o.elem))
        return unwrapped

    return forward
