"""Shared fixtures: the device under test (CPU always; CUDA when a GPU and
kiln's CUDA backend are present) and comparison helpers."""

import contextlib
import os

import pytest
import torch

# Every compile traces: the capture cache's own tests (test_capture_cache.py) turn it on in a folder of their own.
os.environ["KILN_CAPTURE_CACHE"] = "0"

TOLERANCES = {
    torch.float32: dict(atol=1e-4, rtol=1e-4),
    torch.float64: dict(atol=1e-9, rtol=1e-9),
    torch.float16: dict(atol=2e-2, rtol=2e-2),
    torch.bfloat16: dict(atol=8e-2, rtol=5e-2),
}


def assert_close(actual, expected, dtype=None, **overrides):
    """Compares kiln's result with eager's at the dtype's tolerance (exact for ints and bools)."""
    if isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_close(a, e, dtype, **overrides)
        return
    assert actual.shape == expected.shape, f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    tol = dict(TOLERANCES.get(dtype or expected.dtype, dict(atol=0, rtol=0)))
    tol.update(overrides)
    torch.testing.assert_close(actual, expected, equal_nan=True, **tol)


def compile_and_report(fn, *inputs):
    """`fn(*inputs)` compiled by kiln under no_grad, and the kiln.report.Report of its graphs."""
    import functools

    import kiln
    from kiln.dynamo_backend import kiln_backend

    reports = []
    compiled = torch.compile(fn, backend=functools.partial(kiln_backend, reports=reports))
    with torch.no_grad():
        got = compiled(*inputs)
    return got, kiln.report.Report(reports)


def cuda_available() -> bool:
    """A GPU torch can use and a kiln build with its CUDA backend."""
    from kiln import _kiln

    return torch.cuda.is_available() and getattr(_kiln, "has_cuda", lambda: False)()


DEVICES = ["cpu"] + (["cuda"] if cuda_available() else [])


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield


def tiny_gpt2(device="cpu"):
    """transformers' GPT-2 with 2 layers of width 32 and random weights, in eval mode on `device`."""
    import transformers as tf

    config = tf.GPT2Config(vocab_size=96, n_embd=32, n_layer=2, n_head=2, n_positions=64)
    return tf.GPT2LMHeadModel(config).to(device).eval()


@contextlib.contextmanager
def no_tf32():
    """Eager without TF32, like kiln (TF32 only where torch allows it; kiln never enables it yet)."""
    old = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = old
