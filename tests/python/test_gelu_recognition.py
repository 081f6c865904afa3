"""recognize_gelu with fuse_epilogues on real models: transformers' "gelu_new" (GPT-2's MLP
activation, the tanh approximation written out op by op) becomes the GELU epilogue of the MLP's first
matrix product, with eager's results, in f32 and bf16, on the CPU and (on the GPU machine) CUDA."""

from __future__ import annotations

import pytest
import torch

from conftest import assert_close, compile_and_report

TOL = {torch.float32: dict(atol=1e-4, rtol=1e-4), torch.float16: dict(atol=1e-2, rtol=1e-2),
       torch.bfloat16: dict(atol=8e-2, rtol=8e-2)}


def _graph_texts(report):
    return [r.exe._native.graph_text() for g in report.graphs for r in g.region_modules]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_gpt2_mlp_gelu_becomes_the_products_epilogue(dtype, device):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=100, n_positions=64, n_embd=64, n_layer=2, n_head=4)
    model = transformers.GPT2Model(config).eval().to(device, dtype)
    ids = torch.randint(0, 100, (2, 24), device=device)
    with torch.no_grad():
        expected = model(ids).last_hidden_state
    got, report = compile_and_report(model, ids)
    assert_close(got.last_hidden_state, expected, dtype, **TOL[dtype])
    assert not report.fallbacks, str(report)
    text = "\n".join(_graph_texts(report))
    assert text.count('activation="gelu_tanh"') == config.n_layer, text
    assert "tanh(" not in text.replace("gelu_tanh", ""), text


def test_the_written_out_formula_matches_torchs_gelu_tanh():
    # The op-by-op formula, compiled, against torch's own F.gelu(approximate="tanh") on the same input,
    # over a range where the approximation's terms all matter.
    def fn(x):
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0))))

    x = torch.linspace(-8, 8, 4001).reshape(1, -1)
    got, report = compile_and_report(fn, x)
    assert any("gelu_tanh(" in t for t in _graph_texts(report)), _graph_texts(report)
    torch.testing.assert_close(got, torch.nn.functional.gelu(x, approximate="tanh"), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(got, fn(x), atol=1e-6, rtol=1e-6)
