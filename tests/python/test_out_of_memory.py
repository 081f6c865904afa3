"""Out of memory (CPU): kiln's host memory limit (a fault-injection hook)
makes an allocation fail at a chosen point. kiln raises a clear error, keeps
no memory from the failed attempt, leaves the eager model and its parameters
unchanged and usable, and the same compiled model works once memory is there."""

import gc

import pytest
import torch

import kiln
from kiln import _kiln


@pytest.fixture
def host_limit():
    yield _kiln.set_host_memory_limit
    _kiln.set_host_memory_limit(0)


def model_and_snapshot():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64)).eval()
    return model, {k: v.clone() for k, v in model.state_dict().items()}


def assert_unchanged(model, snapshot):
    for key, value in model.state_dict().items():
        assert torch.equal(value, snapshot[key]), f"parameter {key} changed"


def test_out_of_memory_during_a_call_is_clear_leaks_nothing_and_recovers(host_limit):
    model, snapshot = model_and_snapshot()
    x = torch.randn(32, 64)
    with torch.no_grad():
        want = model(x)
        compiled = torch.compile(model, backend="kiln")
        gc.collect()  # earlier tests' garbage is not freed in the middle of this measurement
        before = _kiln.host_memory_in_use()
        host_limit(before + 1)  # room for nothing new: the region's arena cannot be allocated
        with pytest.raises(Exception, match=r"cannot allocate \d+ bytes of host memory: kiln's host memory limit"):
            compiled(x)
        assert _kiln.host_memory_in_use() == before
        assert_unchanged(model, snapshot)
        assert torch.equal(model(x), want)
        host_limit(0)
        torch.testing.assert_close(compiled(x), want, atol=1e-5, rtol=1e-5)


def test_out_of_memory_in_the_graph_api_then_success(host_limit):
    import numpy as np

    g = kiln.Graph()
    x = g.input("x", "f32", [128, 128])
    y = g.op("relu", [g.op("matmul", [x, x])[0]])[0]
    g.set_outputs([g.op("add", [y, y])[0]])
    exe = kiln.compile_graph(g)
    a = np.random.default_rng(0).standard_normal((128, 128), dtype=np.float32)
    host_limit(_kiln.host_memory_in_use() + 1024)
    with pytest.raises(kiln.Error, match="host memory limit"):
        exe(a)
    host_limit(0)
    want = np.maximum(a @ a, 0) * 2
    np.testing.assert_allclose(exe(a)[0], want, rtol=1e-4, atol=1e-3)


@pytest.mark.skipif(not (torch.cuda.is_available() and _kiln.has_cuda()), reason="needs kiln's CUDA backend and a GPU")
def test_cuda_out_of_memory_under_a_capped_memory_fraction_recovers():
    model, snapshot = model_and_snapshot()
    model = model.cuda()
    x = torch.randn(4096, 64, device="cuda")  # activations of ~4 MiB per layer
    with torch.no_grad():
        want = model(x)
        compiled = torch.compile(model, backend="kiln")
        torch.cuda.synchronize()
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.empty_cache()
        torch.cuda.set_per_process_memory_fraction((torch.cuda.memory_allocated() + 2**20) / total)
        try:
            with pytest.raises(Exception, match="(?i)out of memory|cannot allocate"):
                compiled(x)
        finally:
            torch.cuda.set_per_process_memory_fraction(1.0)
        for key, value in model.state_dict().items():
            assert torch.equal(value.cpu(), snapshot[key]), f"parameter {key} changed"
        torch.testing.assert_close(model(x), want)
        torch.testing.assert_close(compiled(x), want, atol=1e-4, rtol=1e-4)
