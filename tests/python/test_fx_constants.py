"""kiln.fx_constants on a CUDA graph, traced with fake CUDA tensors (no GPU needed): a 0-dim CPU
constant that only meets CUDA tensors (Swin's `mask[h, w] = count`) becomes a literal on the compile
device, with the values recorded for the partitioner moved along; one that reaches the graph's output
or meets only CPU tensors stays on the CPU."""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from kiln.fx_constants import inline_small_constants

CUDA = torch.device("cuda")


def _traced(fn, *shapes, device="cuda"):
    with FakeTensorMode():
        inputs = [torch.empty(s, device=device) for s in shapes]
    return make_fx(fn, tracing_mode="fake")(*inputs)


def _literal_and_copies(gm):
    return [n for n in gm.graph.nodes
            if n.target in (torch.ops.aten.scalar_tensor.default, torch.ops.aten.lift_fresh_copy.default)]


def test_a_cpu_scalar_written_into_a_cuda_tensor_moves_to_the_device():
    def fn(x):
        y = x.clone()
        y[0:1] = torch.tensor(3.0)  # scalar_tensor -> lift_fresh_copy -> fill_ into a CUDA slice
        return y * 2

    gm = _traced(fn, (4, 3))
    assert inline_small_constants(gm, CUDA) == 1
    nodes = _literal_and_copies(gm)
    assert len(nodes) == 2
    assert all(n.meta["val"].device.type == "cuda" for n in nodes)
    literal = next(n for n in nodes if n.target is torch.ops.aten.scalar_tensor.default)
    assert literal.args == (3.0,) and literal.kwargs["device"] == CUDA
    assert not any(n.op == "get_attr" for n in gm.graph.nodes)


def test_a_cpu_scalar_that_is_an_output_or_meets_only_cpu_tensors_stays_on_the_cpu():
    def returned(x):
        return x * 2, torch.tensor(5.0).clone()

    def cpu_only(x):
        return x.sum() + torch.tensor(1.0).cpu().clone()

    for fn in (returned, cpu_only):
        gm = _traced(fn, (4,), device="cuda" if fn is returned else "cpu")
        assert inline_small_constants(gm, CUDA) == 1
        literal = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.scalar_tensor.default)
        assert literal.kwargs["device"].type == "cpu", gm.graph
        assert literal.meta["val"].device.type == "cpu"
