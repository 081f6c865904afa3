"""Ops the full-size model zoo left to PyTorch on the GPU, now kiln's on every
backend: softmax with ATen's half_to_float (f16 in, f32 out), an inference
batch norm of a channels-last input that follows no convolution (torchvision's
MaxViT), and cumsum (position ids in RoBERTa, GPT-2, LLaMA, Mistral, Qwen2).
(T5's isinf: test_special_values.py.) Each is compiled with backend="kiln" and
compared with eager, on CPU and (with a GPU) on CUDA, with nothing left to
PyTorch."""

from __future__ import annotations

import functools

import pytest
import torch

import kiln
from kiln.dynamo_backend import kiln_backend

from conftest import assert_close, compile_and_report, cuda_available

aten = torch.ops.aten
needs_cuda = pytest.mark.skipif(not cuda_available(), reason="needs a GPU and kiln's CUDA backend")
DEVICES = ["cpu", pytest.param("cuda", marks=needs_cuda)]



def _check_lowered(report, target):
    assert not report.fallbacks, str(report)
    assert target in report.lowered_ops(), str(report)


# ---- softmax with half_to_float ------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", [-1, 1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_half_to_float(log, dim, device):
    x = torch.randn(3, 5, 7, device=device).half()
    op = aten._log_softmax if log else aten._softmax
    got, report = compile_and_report(lambda t: op(t, dim, True), x)
    # ATen's CPU kernel refuses half_to_float; its meaning is the f32 softmax of the f16 input.
    reference = (torch.log_softmax if log else torch.softmax)(x.float(), dim)
    assert_close(got, reference)
    if device == "cuda":
        assert_close(got, op(x, dim, True))
    _check_lowered(report, "aten._log_softmax.default" if log else "aten._softmax.default")


# ---- batch norm of a channels-last input, after no convolution ------------------------------


def _batch_norm(channels, dtype, device):
    with torch.random.fork_rng():
        torch.manual_seed(0)
        bn = torch.nn.BatchNorm2d(channels).eval()
        bn.running_mean.copy_(torch.randn(channels))
        bn.running_var.copy_(torch.rand(channels) + 0.5)
        bn.weight.data.copy_(torch.randn(channels))
        bn.bias.data.copy_(torch.randn(channels))
    return bn.to(device, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_batch_norm_of_permuted_input(dtype, device):
    # MaxViT's MBConv pre-norm: NHWC activations permuted back to NCHW, so channels-last strides.
    bn = _batch_norm(16, dtype, device)
    x = torch.randn(2, 7, 7, 16, device=device, dtype=dtype)

    def fn(t):
        return bn(t.permute(0, 3, 1, 2))

    got, report = compile_and_report(fn, x)
    with torch.no_grad():
        assert_close(got, fn(x))
    _check_lowered(report, "aten._native_batch_norm_legit_no_training.default")


@pytest.mark.parametrize("device", DEVICES)
def test_batch_norm_of_channels_last_input_sees_weight_updates(device):
    bn = _batch_norm(8, torch.float32, device)
    x = torch.randn(3, 8, 5, 4, device=device).to(memory_format=torch.channels_last)
    reports = []
    compiled = torch.compile(bn, backend=functools.partial(kiln_backend, reports=reports))
    with torch.no_grad():
        assert_close(compiled(x), bn(x))
        bn.running_mean.add_(1.0)  # in-place updates the next call must see
        bn.weight.mul_(2.0)
        assert_close(compiled(x), bn(x))
    _check_lowered(kiln.report.Report(reports), "aten._native_batch_norm_legit_no_training.default")


# ---- cumsum -----------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum(dim, dtype, device):
    g = torch.Generator().manual_seed(dim + 5)
    x = torch.randint(-4, 5, (6, 9, 5), generator=g).to(device, dtype).transpose(0, 2)  # strided
    got, report = compile_and_report(lambda t: torch.cumsum(t, dim), x)
    assert_close(got, torch.cumsum(x, dim))
    _check_lowered(report, "aten.cumsum.default")


@pytest.mark.parametrize("device", DEVICES)
def test_cumsum_position_ids(device):
    # RoBERTa's create_position_ids_from_input_ids: padding keeps padding_idx, tokens count from it.
    padding_idx = 1
    ids = torch.tensor([[5, 8, 9, 1, 1], [7, 1, 4, 4, 6]], device=device)

    def position_ids(input_ids):
        mask = input_ids.ne(padding_idx).int()
        return (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + padding_idx

    got, report = compile_and_report(position_ids, ids)
    assert_close(got, position_ids(ids))
    _check_lowered(report, "aten.cumsum.default")
