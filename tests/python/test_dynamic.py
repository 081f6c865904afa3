"""Dynamic batch: a model called with batch sizes 1, 2, 3 and 8 under
torch.compile(dynamic=True), or Dynamo's automatic dynamic shapes, matches
eager, and Dynamo and AOT trace the model once (kiln re-specializes the same
ATen graph per batch size, kiln.specialize)."""

import functools

import pytest
import torch

from conftest import assert_close
from kiln.dynamo_backend import kiln_backend
import kiln.specialize

BATCHES = (1, 2, 3, 8)


class SmallConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(y.mean(dim=(2, 3))).reshape(x.shape[0], -1).softmax(-1)


def tiny_bert():
    import transformers as tf

    config = tf.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=64, attn_implementation="eager")
    model = tf.BertModel(config).eval()
    return lambda ids: model(ids, return_dict=True).last_hidden_state, model


def _compile(fn, dynamic):
    reports = []
    return torch.compile(fn, backend=functools.partial(kiln_backend, reports=reports), dynamic=dynamic), reports


@pytest.fixture
def specialized_shapes(monkeypatch):
    """The input shapes (kiln.specialize.shape_key) kiln specialized a symbolic graph for."""
    seen = []
    original = kiln.specialize.specialize

    def counting(gm, args):
        seen.append(kiln.specialize.shape_key(args))
        return original(gm, args)

    monkeypatch.setattr(kiln.specialize, "specialize", counting)
    return seen


@pytest.mark.parametrize("dynamic", [True, None], ids=["dynamic_true", "automatic"])
def test_conv_net_batches(dynamic, specialized_shapes):
    torch.manual_seed(0)
    model = SmallConvNet().eval()
    compiled, reports = _compile(model, dynamic)
    with torch.no_grad():
        for b in BATCHES:
            x = torch.randn(b, 3, 8, 8)
            assert_close(compiled(x), model(x))
    # Dynamo specializes size 1: a graph for batch 1, then (both modes) one
    # symbolic graph for 2, 3 and 8, which kiln specializes once per size. With
    # dynamic=True the batch-1 graph is symbolic too (in the image sides).
    assert len(reports) == 2
    assert len(specialized_shapes) == len(set(specialized_shapes)) == (4 if dynamic else 3)


def test_bert_batches_and_sequence_lengths(specialized_shapes):
    torch.manual_seed(0)
    fn, model = tiny_bert()
    compiled, reports = _compile(fn, True)
    with torch.no_grad():
        for b in BATCHES:
            ids = torch.randint(0, 64, (b, 7))
            assert_close(compiled(ids), fn(ids), atol=1e-4, rtol=1e-4)
        ids = torch.randint(0, 64, (2, 11))  # another sequence length: one more specialization
        assert_close(compiled(ids), fn(ids), atol=1e-4, rtol=1e-4)
    assert len(reports) == 2  # batch 1 (static), then one symbolic graph
    # Batch 1 (symbolic in the sequence length), batches 2, 3, 8, then length 11.
    assert len(specialized_shapes) == len(set(specialized_shapes)) == 5


def test_specializations_are_cached(specialized_shapes):
    torch.manual_seed(0)
    model = SmallConvNet().eval()
    compiled, reports = _compile(model, True)
    with torch.no_grad():
        for b in (2, 3, 2, 3, 2):
            x = torch.randn(b, 3, 8, 8)
            assert_close(compiled(x), model(x))
    assert len(reports) == 1
    assert len(specialized_shapes) == len(set(specialized_shapes)) == 2
