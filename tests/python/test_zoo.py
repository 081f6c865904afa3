"""The model zoo on CPU: 40+ torchvision, timm and transformers models at
reduced sizes (tests/python/zoo/), each compiled with backend="kiln" and
compared with eager; what falls back to PyTorch must be exactly what
tests/python/zoo/expected_fallbacks.toml lists, in both directions.

f32 for every model; bf16 for a subset (kiln's CPU kernels compute 16-bit
floats in f32). docs/models.md has the table from a run of this suite."""

import json
import os

import pytest
import torch

from zoo import expected, run

BF16 = ["tv_resnet18", "timm_vit_tiny", "timm_convnext_atto", "bert", "llama", "gpt2"]

_EXPECTED = expected.load()
TOLERANCE_FLOOR = {dtype: atol for dtype, (atol, _) in run.TOLERANCE.items()}  # allowed == atol: eager gave zeros


def _check(name: str, dtype: torch.dtype, tag: str) -> None:
    result = run.run(name, dtype=dtype)
    if os.environ.get("KILN_ZOO_RESULTS"):  # zoo/table.py turns these lines into docs/models.md's table
        with open(os.environ["KILN_ZOO_RESULTS"], "a") as f:
            f.write(json.dumps(run.as_record(result)) + "\n")
    assert result.allowed > TOLERANCE_FLOOR[dtype], f"{name} ({tag}): eager's output is all zeros, the comparison means nothing"
    assert result.passed, (
        f"{name} ({tag}): kiln differs from eager by {result.max_diff:.3g}, more than {result.allowed:.3g}")
    key = expected.key(name, tag)
    listed = _EXPECTED.get(key, {})
    new = {op: why for op, why in result.fallbacks.items() if op not in listed}
    gone = sorted(op for op in listed if op not in result.fallbacks)
    assert not new, (
        f"{name} ({tag}): new fallbacks to PyTorch: {new}. Implement the op, or list it under [{key}] in "
        f"{expected.PATH.name} with the reason.")
    assert not gone, (
        f"{name} ({tag}): {gone} no longer fall back: remove them from [{key}] in {expected.PATH.name}.")


@pytest.mark.parametrize("name", run.NAMES)
def test_zoo_f32(name):
    _check(name, torch.float32, "f32")


@pytest.mark.parametrize("name", BF16)
def test_zoo_bf16(name):
    _check(name, torch.bfloat16, "bf16")


def test_expected_fallbacks_name_zoo_models():
    models = {k.split(".")[0] for k in _EXPECTED}
    unknown = sorted(models - set(run.NAMES))
    assert not unknown, f"{expected.PATH.name} lists models the zoo does not have: {unknown}"
    for key, ops in _EXPECTED.items():
        for op, why in ops.items():
            assert why.strip(), f"{expected.PATH.name}: [{key}] {op} needs a reason"


# The ops the zoo needed beyond the earlier op suite, each checked alone:
# lowered (no fallback) and equal to eager, edge cases included.
def _lowered_and_equal(fn, *inputs):
    import kiln

    torch._dynamo.reset()
    report = kiln.explain(fn, *inputs)
    assert not report.fallbacks, str(report)
    torch._dynamo.reset()
    with torch.no_grad():
        actual = torch.compile(fn, backend="kiln")(*inputs)
    expected = fn(*inputs)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum(dtype, dim):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(3, 5, 4, generator=g) * 3).to(dtype)
    _lowered_and_equal(lambda t: t.cumsum(dim), x)
    _lowered_and_equal(lambda t: t.transpose(0, 2).cumsum(dim), x)  # a strided input


def test_cumsum_with_dtype():
    x = torch.arange(12).reshape(3, 4) % 3 == 0
    _lowered_and_equal(lambda t: torch.cumsum(t, 1, dtype=torch.float32) * 0.5, x)


def test_index_with_tensors():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 6, 3, generator=g)
    rows = torch.tensor([[0], [3], [-1]])  # broadcast with cols, negative counts from the end
    cols = torch.tensor([1, 5, -6, 2])
    _lowered_and_equal(lambda t, r, c: t[r, c] + 1, x, rows, cols)
    _lowered_and_equal(lambda t, r: t[r] * 2, x, cols.clamp(min=0) % 4)


def test_bitwise_on_bool_masks():
    g = torch.Generator().manual_seed(0)
    a, b = torch.rand(4, 1, generator=g) > 0.5, torch.rand(1, 5, generator=g) > 0.5
    _lowered_and_equal(lambda x, y: (x & y) | ~x, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_fmod(dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(3, 7, generator=g) * 10).to(dtype)
    _lowered_and_equal(lambda t: torch.fmod(t, 3) + torch.fmod(t, -4), x)
    if dtype.is_floating_point:
        _lowered_and_equal(lambda t, d: torch.fmod(t, d), x, torch.randn(7, generator=g))


def test_conv1d():
    g = torch.Generator().manual_seed(0)
    conv = torch.nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=1).eval()
    strided = torch.nn.Conv1d(4, 6, 3, padding=2, dilation=2, groups=2, bias=False).eval()
    x = torch.randn(2, 4, 11, generator=g)
    _lowered_and_equal(lambda t: conv(t) + strided(t)[..., ::2], x)


def test_as_strided_that_is_a_view():
    x = torch.randn(2, 6, 4, 4)
    # ConvNeXt's pooled features: [N, C, 1, 1] re-strided with free strides on the size-1 dims.
    _lowered_and_equal(lambda t: torch.as_strided(t.mean((2, 3), keepdim=True), (2, 6, 1, 1), (6, 1, 6, 6)) * 2, x)


def test_as_strided_that_is_not_a_view_falls_back_correctly():
    import kiln

    x = torch.randn(4, 6)
    fn = lambda t: torch.as_strided(t + 1, (3, 3), (2, 1)) * 2  # overlapping windows  # noqa: E731
    report = kiln.explain(fn, x)
    assert [d.target for d in report.fallbacks] == ["aten.as_strided.default"], str(report)
    torch._dynamo.reset()
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(fn, backend="kiln")(x), fn(x))
