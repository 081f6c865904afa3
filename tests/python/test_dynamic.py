"""Dynamic batch: a model called with batch sizes 1, 2, 3 and 8 under
torch.compile(dynamic=True), or Dynamo's automatic dynamic shapes, matches
eager, and Dynamo and AOT trace the model once (kiln re-specializes the same
ATen graph per batch size, kiln.specialize)."""

import functools

import pytest
import torch

from conftest import assert_close, tiny_gpt2
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


def _shapes(args) -> tuple:
    """Sizes as ints; Dynamo's example values through their hints (int() would specialize them)."""
    hint = kiln.specialize._hint
    return tuple(tuple(map(hint, a.shape)) if isinstance(a, torch.Tensor) else hint(a) for a in args)


@pytest.fixture
def specialized_shapes(monkeypatch):
    """The input shapes kiln specialized a symbolic graph for."""
    seen = []
    original = kiln.specialize.specialize

    def counting(gm, args, symbolic=None):
        seen.append(_shapes(args))
        return original(gm, args, symbolic)

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


def _decode(model, ids, steps):
    """Greedy decoding with transformers' dynamic cache: one call per new length of the cache."""
    with torch.inference_mode():
        return model.generate(ids, max_new_tokens=steps, do_sample=False, pad_token_id=0)


@pytest.fixture
def symbolic_graphs(monkeypatch):
    """(the symbolic graph, the call's arguments) of every specialization kiln made."""
    seen = []
    original = kiln.specialize.specialize

    def recording(gm, args, symbolic=None):
        seen.append((gm, list(args)))
        return original(gm, args, symbolic)

    monkeypatch.setattr(kiln.specialize, "specialize", recording)
    return seen


def _described(value):
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), value.stride(), value.storage_offset(), value.dtype, value.device)
    if isinstance(value, (list, tuple)):
        return [_described(v) for v in value]
    return value


@pytest.mark.parametrize("case", ["bert", "gpt2_decode"])
def test_values_from_symbols_equal_fake_propagation(case, symbolic_graphs):
    """Each node's value with the symbols bound to the call equals what running the graph on fake tensors
    gives: shapes, strides, offsets, dtypes, devices and the symbolic ints."""
    torch.manual_seed(0)
    if case == "bert":
        fn, _ = tiny_bert()
        compiled, _ = _compile(fn, True)
        with torch.no_grad():
            for b, n in ((2, 7), (3, 9)):
                compiled(torch.randint(0, 64, (b, n)))
    else:
        model = tiny_gpt2()
        model.forward = torch.compile(model.forward, backend=kiln_backend)
        _decode(model, torch.randint(0, 96, (2, 5)), 6)
    assert len(symbolic_graphs) >= 2
    for gm, args in symbolic_graphs:
        symbolic = kiln.specialize.SymbolicValues(gm)
        assert symbolic.ready
        fast = symbolic.values(args)
        slow = kiln.specialize._Propagate(gm).run_fake(args)
        for node in symbolic.nodes:
            assert _described(fast[node]) == _described(slow[node]), node.format_node()


def test_decoding_matches_eager_and_specializes_each_length_once(specialized_shapes):
    torch.manual_seed(0)
    model = tiny_gpt2()
    ids = torch.randint(0, 96, (2, 5))
    expected = _decode(model, ids, 10)
    model.forward = torch.compile(model.forward, backend=kiln_backend)
    for _ in range(3):
        assert torch.equal(_decode(model, ids, 10), expected)
    # Dynamo compiles the first decode length statically, so the symbolic graph meets it only from the
    # second generate() on: every length is specialized once, and the third generate() compiles nothing.
    assert len(specialized_shapes) == len(set(specialized_shapes)) == 9


def test_a_longer_walk_than_the_cache_keeps_the_sizes_met_first(monkeypatch, specialized_shapes):
    """Sizes walked in order, more than the cache holds (a decode loop's lengths): least-recently-used
    would drop each size just before its next use and re-specialize every one on every walk; the cache
    drops the least called, the most recent of those, so the first sizes stay."""
    monkeypatch.setattr(kiln.specialize, "MAX_SPECIALIZATIONS", 4)
    torch.manual_seed(0)
    model = SmallConvNet().eval()
    compiled, _ = _compile(model, True)
    with torch.no_grad():
        for walk in range(3):
            before = len(specialized_shapes)
            for b in range(2, 10):
                x = torch.randn(b, 3, 8, 8)
                assert_close(compiled(x), model(x))
            # The first walk specializes all 8 sizes; later ones 5: sizes 2, 3 and 4 stay cached.
            assert len(specialized_shapes) - before == (8 if walk == 0 else 5)


def test_dropped_specializations_are_freed(monkeypatch):
    """A dropped specialization's regions (their executables and arenas) are released, not kept by a list
    of reports."""
    import gc
    import weakref

    monkeypatch.setattr(kiln.specialize, "MAX_SPECIALIZATIONS", 2)
    made = []
    original = kiln.specialize.ShapeSpecialized._add

    def recording(self, key, args):
        report = original(self, key, args)
        made.extend(weakref.ref(r) for r in report.region_modules)
        return report

    monkeypatch.setattr(kiln.specialize.ShapeSpecialized, "_add", recording)
    torch.manual_seed(0)
    model = SmallConvNet().eval()
    compiled = torch.compile(model, backend=kiln_backend, dynamic=True)
    with torch.no_grad():
        for b in (2, 3, 4, 5, 6):
            x = torch.randn(b, 3, 8, 8)
            assert_close(compiled(x), model(x))
    gc.collect()
    assert len(made) == 5  # batches 2 (Dynamo's example) to 6, one region each
    assert sum(r() is not None for r in made) == 2  # the two kept


def test_the_arena_limit_keeps_only_what_fits(monkeypatch, specialized_shapes):
    """Past MAX_ARENA_BYTES of the cached specializations' arenas the least called go, whatever their count;
    the one in use always stays."""
    monkeypatch.setattr(kiln.specialize, "MAX_ARENA_BYTES", 1)
    torch.manual_seed(0)
    model = SmallConvNet().eval()
    compiled, _ = _compile(model, True)
    with torch.no_grad():
        for b in (2, 3, 2, 3):
            x = torch.randn(b, 3, 8, 8)
            assert_close(compiled(x), model(x))
    assert len(specialized_shapes) == 4  # each call's size had been dropped for the other's
