"""pair_copies on a real decoder: GPT-2's key and value outputs, each a contiguous copy of a view of the
packed q/k/v projection, are one `copies` node per layer, and every output (the hidden state and each
layer's key and value) equals eager's."""

from __future__ import annotations

import pytest
import torch

from conftest import assert_close, compile_and_report


def test_gpt2_key_and_value_copies_pair_up(device):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=100, n_positions=64, n_embd=64, n_layer=3, n_head=4)
    model = transformers.GPT2Model(config).eval().to(device)
    ids = torch.randint(0, 100, (2, 16), device=device)
    with torch.no_grad():
        expected = model(ids, use_cache=True)
    got, report = compile_and_report(lambda x: model(x, use_cache=True), ids)
    assert not report.fallbacks, str(report)
    assert_close(got.last_hidden_state, expected.last_hidden_state, torch.float32)
    for layer in range(config.n_layer):
        # Cache layers as transformers 4.56+ and 5 both expose them (5's DynamicCache is not subscriptable).
        got_layer, expected_layer = got.past_key_values.layers[layer], expected.past_key_values.layers[layer]
        for g, e in zip((got_layer.keys, got_layer.values), (expected_layer.keys, expected_layer.values)):
            assert g.is_contiguous() and g.shape == e.shape
            assert_close(g, e, torch.float32)
    texts = [r.exe._native.graph_text() for g in report.graphs for r in g.region_modules]
    text = "\n".join(texts)
    assert text.count(" = copies(") == config.n_layer and " = contiguous(" not in text, text
