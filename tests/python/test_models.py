"""Real models with random weights, compiled with backend="kiln" and compared
with eager. Small inputs and configs keep CI fast on 2 cores; the GPU machine
runs the full sizes through bench/."""

import functools

import pytest
import torch
import torchvision

from conftest import assert_close
from kiln.dynamo_backend import kiln_backend


def run_and_compare(model, inputs, atol=1e-4, rtol=1e-4, max_fallbacks=0):
    reports = []
    compiled = torch.compile(model, backend=functools.partial(kiln_backend, reports=reports))
    with torch.no_grad():
        expected = model(*inputs)
        got = compiled(*inputs)
    if hasattr(expected, "logits"):
        expected, got = expected.logits, got.logits
    assert_close(got, expected, atol=atol, rtol=rtol)
    fallbacks = [d for r in reports for d in r.fallbacks]
    assert len(fallbacks) <= max_fallbacks, "\n".join(f"{d.target}: {d.reason}" for d in fallbacks)
    assert any(r.lowered for r in reports)


@pytest.mark.parametrize(
    "name, kwargs, size",
    [
        ("resnet18", {}, 64),
        ("resnet50", {}, 64),
        ("mobilenet_v3_small", {}, 64),
        ("vit_b_16", {"image_size": 64}, 64),
    ],
)
def test_torchvision(name, kwargs, size):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(**kwargs).eval()
    run_and_compare(model, [torch.randn(2, 3, size, size)], atol=2e-4, rtol=2e-4)


def test_bert_small():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=120, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=64,
    )
    model = transformers.BertForMaskedLM(config).eval()
    ids = torch.randint(0, 120, (2, 16))
    run_and_compare(model, [ids], atol=2e-4, rtol=2e-4)


def test_gpt2_small():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=120, n_positions=64, n_embd=64, n_layer=2, n_head=4)
    model = transformers.GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, 120, (2, 16))
    run_and_compare(model, [ids], atol=2e-4, rtol=2e-4)
