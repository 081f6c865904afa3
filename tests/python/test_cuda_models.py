"""torch.compile(backend="kiln") on CUDA: kiln's CUDA backend runs what it has
kernels for, the rest stays in PyTorch, and results match eager. Skips
without a GPU and kiln's CUDA plugin; run on the GPU machine (scripts/gpu_check.sh)."""

import functools

import pytest
import torch

from conftest import assert_close, cuda_available
from kiln.dynamo_backend import kiln_backend

pytestmark = pytest.mark.skipif(not cuda_available(), reason="needs a GPU and kiln's CUDA backend")


def compile_and_compare(model, inputs, dtype, min_lowered=1):
    reports = []
    compiled = torch.compile(model, backend=functools.partial(kiln_backend, reports=reports))
    with torch.inference_mode():
        expected = model(*inputs)
        got = compiled(*inputs)
        torch.cuda.synchronize()
    if hasattr(expected, "logits"):
        expected, got = expected.logits, got.logits
    assert_close(got, expected, dtype=dtype)
    lowered = [d for r in reports for d in r.lowered]
    assert len(lowered) >= min_lowered, "\n".join(str(r) for r in reports)
    return reports


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_mlp(dtype):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.LayerNorm(128), torch.nn.Linear(128, 10),
        torch.nn.Softmax(dim=-1),
    ).to("cuda", dtype).eval()
    reports = compile_and_compare(model, [torch.randn(7, 64, device="cuda", dtype=dtype)], dtype, min_lowered=5)
    assert [d for r in reports for d in r.fallbacks] == []


def test_runs_on_the_callers_stream():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU()).cuda().half().eval()
    x = torch.randn(64, 256, device="cuda", dtype=torch.half)
    compiled = torch.compile(model, backend=kiln_backend)
    stream = torch.cuda.Stream()
    with torch.inference_mode():
        expected = model(x)
        torch.cuda.synchronize()
        with torch.cuda.stream(stream):
            got = compiled(x)
            got2 = got * 1  # enqueued after kiln's work on the same stream
        stream.synchronize()
    assert_close(got2, expected, dtype=torch.float16)


def test_gpt2_small_fp16():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=256, n_positions=64, n_embd=128, n_layer=2, n_head=4)
    model = transformers.GPT2LMHeadModel(config).cuda().half().eval()
    ids = torch.randint(0, 256, (2, 32), device="cuda")
    compile_and_compare(model, [ids], torch.float16, min_lowered=20)
