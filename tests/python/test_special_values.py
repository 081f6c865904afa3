"""isinf, isnan and isfinite (kiln lowers them as comparisons: |x| == inf,
x != x, |x| < inf) on +inf, -inf, NaN and finite values in f32, f16 and bf16,
and T5's fp16 clamp of infinities, compiled with backend="kiln" and compared
with eager, on CPU and (with a GPU) on CUDA, with nothing left to PyTorch."""

from __future__ import annotations

import pytest
import torch

from conftest import assert_close, compile_and_report, cuda_available

needs_cuda = pytest.mark.skipif(not cuda_available(), reason="needs a GPU and kiln's CUDA backend")
DEVICES = ["cpu", pytest.param("cuda", marks=needs_cuda)]
FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def _specials(dtype, device):
    """Every special value, the largest finite ones, and ordinary numbers, in one tensor."""
    finfo = torch.finfo(dtype)
    values = [float("inf"), float("-inf"), float("nan"), finfo.max, -finfo.max, finfo.tiny, 0.0, -0.0, 1.5, -3.0]
    return torch.tensor(values, dtype=dtype, device=device).repeat(3, 1)



def _check_lowered(report, *targets):
    assert not report.fallbacks, str(report)
    lowered = report.lowered_ops()
    assert all(t in lowered for t in targets), str(report)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["isinf", "isnan", "isfinite"])
def test_special_value_tests_match_eager(op, dtype, device):
    fn = getattr(torch, op)
    x = _specials(dtype, device)
    got, report = compile_and_report(lambda t: fn(t), x)
    assert_close(got, fn(x))
    _check_lowered(report, *([] if op == "isfinite" else [f"aten.{op}.default"]))  # Dynamo decomposes isfinite


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_integers_have_no_special_values(dtype, device):
    x = torch.tensor([[0, 1, 1], [1, 0, 1]], device=device).to(dtype)
    got, report = compile_and_report(lambda t: (torch.isinf(t), torch.isnan(t), torch.isfinite(t)), x)
    assert_close(got, (torch.isinf(x), torch.isnan(x), torch.isfinite(x)))
    _check_lowered(report)


def _t5_clamp(h):
    # transformers' T5 layers, in fp16: keep infinities out of the residual stream.
    clamp_value = torch.where(torch.isinf(h).any(), torch.finfo(h.dtype).max - 1000, torch.finfo(h.dtype).max)
    return torch.clamp(h, min=-clamp_value, max=clamp_value)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("with_inf", [True, False])
def test_t5_fp16_clamp_matches_eager(with_inf, device):
    h = torch.randn(2, 5, 8, dtype=torch.float16, device=device) * 100
    if with_inf:
        h[0, 1, 2], h[1, 3, 4] = float("inf"), float("-inf")
    got, report = compile_and_report(_t5_clamp, h)
    assert_close(got, _t5_clamp(h))
    _check_lowered(report, "aten.isinf.default")
