"""Folded constants on CUDA (kiln.folding, kiln.region): once every constant is folded, a call checks
the folds' sources after its launch, and a call that re-folded runs again on the same stream, so
in-place updates are still seen on the next call; folds run on the caller's stream. Skips without a GPU
and kiln's CUDA backend; run on the GPU machine (scripts/gpu_check.sh)."""

import functools

import pytest
import torch

from conftest import assert_close, cuda_available, no_tf32
from kiln.dynamo_backend import kiln_backend

needs_cuda = pytest.mark.skipif(not cuda_available(), reason="needs a GPU and kiln's CUDA backend")


def _conv_bn():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(64, 256, 3, padding=1), torch.nn.BatchNorm2d(256),
                                torch.nn.ReLU(), torch.nn.Conv2d(256, 64, 3, padding=1, bias=False),
                                torch.nn.BatchNorm2d(64)).cuda().eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
    return model, torch.randn(4, 64, 16, 16, device="cuda")


@needs_cuda
@pytest.mark.parametrize("side_stream", [False, True])
def test_in_place_updates_are_seen_by_the_next_call_on_the_callers_stream(side_stream):
    model, x = _conv_bn()
    reports = []
    compiled = torch.compile(model, backend=functools.partial(kiln_backend, reports=reports))
    stream = torch.cuda.Stream() if side_stream else torch.cuda.current_stream()
    with no_tf32(), torch.no_grad(), torch.cuda.stream(stream):
        for _ in range(3):  # the first call folds; the later ones replay a CUDA graph
            assert_close(compiled(x), model(x))
        (region,) = [r for report in reports for r in report.region_modules]
        constants = region.folds.constants
        assert constants and all(c.folds == 1 for c in constants)
        calls = region.exe.call_stats()["calls"]
        for _ in range(2):  # in place, queued on the stream: the folds must run after these, the call after them
            model[0].weight.mul_(-2.0)
            model[1].running_var.mul_(3.0)
            model[4].running_var.mul_(0.5)  # with the two above: a source of every constant
            got, expected = compiled(x), model(x)
            stream.synchronize()
            assert_close(got, expected)
        assert all(c.folds == 3 for c in constants)
        # each updating call ran twice: once with the old constants, checked after its launch, then again
        assert region.exe.call_stats()["calls"] == calls + 4
        unchanged = compiled(x)
        assert region.exe.call_stats()["calls"] == calls + 5  # nothing changed: one run, no re-fold
        assert all(c.folds == 3 for c in constants)
        assert_close(unchanged, model(x))
