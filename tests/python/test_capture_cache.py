"""kiln.capture_cache and kiln.graph_serial: a second compile of the same graph takes its ATen graph from
the cache, the same graph node for node, and gives eager's results with the model's current weights; a
key changes with anything the trace reads; graphs calling what the cache cannot name are never cached;
a damaged entry is traced again; KILN_CAPTURE_CACHE=0 writes nothing."""

import functools
import json

import pytest
import torch

from conftest import assert_close
from kiln import capture_cache, capture_key, graph_serial
from kiln.dynamo_backend import kiln_backend
from test_aten_capture import Block, _dynamo_graph, _signature


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CAPTURE_CACHE", "1")
    monkeypatch.setenv("KILN_CAPTURE_CACHE_DIR", str(tmp_path))
    return tmp_path


class Constants(torch.nn.Module):
    """A tensor constant made in forward (transformers' `torch.tensor(finfo.min)`), an int constant, a
    float that is not a short decimal, and a tuple output."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        floor = torch.tensor(torch.finfo(torch.float32).min)
        masked = torch.where(x > 0.1, self.proj(x), floor)
        return masked.amax(-1), (x * (1 / 3) + torch.tensor(7, dtype=torch.int64)).sum(0)


def _compile(model, *inputs):
    reports = []
    compiled = torch.compile(model, backend=functools.partial(kiln_backend, reports=reports))
    with torch.no_grad():
        out = compiled(*inputs)
    torch._dynamo.reset()
    return out, [r.capture for r in reports]


@pytest.mark.parametrize("make", [Block, Constants], ids=["block", "constants"])
def test_second_compile_reads_the_cache_and_matches_eager(cache, make, device):
    torch.manual_seed(0)
    model = make().eval().to(device)
    inputs = (torch.randn(2, 5, 16), torch.randn(1, 2, 6, 6)) if make is Block else (torch.randn(4, 8),)
    inputs = tuple(t.to(device) for t in inputs)
    with torch.no_grad():
        expected = model(*inputs)
    first, how_first = _compile(model, *inputs)
    assert how_first == ["one trace"]
    assert len(list(cache.glob("*.json"))) == 1
    second, how_second = _compile(model, *inputs)
    assert how_second == ["one trace, from the capture cache"]
    assert_close(first, expected)
    assert_close(second, expected)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_cached_graph_is_the_traced_graph(cache):
    gm, example_inputs = _dynamo_graph(Constants().eval(), torch.randn(4, 8))
    traced, how = capture_cache.capture(gm, example_inputs)
    cached, how_cached = capture_cache.capture(gm, example_inputs)
    assert how_cached == f"{how}, from the capture cache"
    assert _signature(cached) == _signature(traced)
    for a, b in zip(traced.graph.nodes, cached.graph.nodes):
        va, vb = a.meta.get("val"), b.meta.get("val")
        if isinstance(va, torch.Tensor):
            assert (va.stride(), va.storage_offset(), va.device) == (vb.stride(), vb.storage_offset(), vb.device)
        if a.op == "get_attr":
            want, got = getattr(traced, a.target), getattr(cached, b.target)
            assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)


def test_weights_are_not_in_the_cache(cache):
    """A model of the same structure with other weights hits the same entry and computes with its own."""
    x = torch.randn(2, 5, 16), torch.randn(1, 2, 6, 6)
    torch.manual_seed(1)
    one = Block().eval()
    torch.manual_seed(2)
    other = Block().eval()
    _compile(one, *x)
    got, how = _compile(other, *x)
    assert how == ["one trace, from the capture cache"]
    with torch.no_grad():
        assert_close(got, other(*x))


def _key(fn, *inputs):
    gm, example_inputs = _dynamo_graph(fn, *inputs)
    torch._dynamo.reset()
    return capture_key.graph_key(gm, example_inputs)


def test_key_follows_what_the_trace_reads():
    x = torch.randn(4, 8)
    base = _key(lambda t: torch.relu(t) * 2.0, x)
    assert base is not None and base == _key(lambda t: torch.relu(t) * 2.0, torch.randn(4, 8))
    assert _key(lambda t: torch.relu(t) * 2.5, x) != base  # a constant
    assert _key(lambda t: torch.sigmoid(t) * 2.0, x) != base  # a target
    assert _key(lambda t: torch.relu(t) * 2.0, torch.randn(4, 9)) != base  # a shape
    assert _key(lambda t: torch.relu(t) * 2.0, x.double()) != base  # a dtype
    assert _key(lambda t: torch.relu(t) * 2.0, torch.randn(8, 4).t()) != base  # strides
    gm, example_inputs = _dynamo_graph(lambda t: torch.relu(t) * 2.0, x)
    assert capture_key.graph_key(gm, example_inputs) == base
    with torch.no_grad():
        assert capture_key.graph_key(gm, example_inputs) != base  # grad mode
    y = torch.randn(4, 8)
    # Two inputs on one storage, or on two.
    assert _key(lambda a, b: a + b, x, x[:]) != _key(lambda a, b: a + b, x, y)


@pytest.mark.parametrize("switch", ["flash_sdp", "math_sdp_reduction", "sdp_order", "mkldnn", "opt_einsum"])
def test_backend_switches_are_in_the_key(switch):
    """Switches a decomposition or an op choice reads while tracing (found by review: torch's CPU attention
    choice, the math path's casts, the LSTM decomposition, einsum's contraction order)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    gm, example_inputs = _dynamo_graph(lambda t: torch.relu(t) * 2.0, torch.randn(4, 8))
    base = capture_key.graph_key(gm, example_inputs)
    b = torch.backends
    flips = {"flash_sdp": (b.cuda.flash_sdp_enabled, b.cuda.enable_flash_sdp),
             "math_sdp_reduction": (b.cuda.fp16_bf16_reduction_math_sdp_allowed,
                                    b.cuda.allow_fp16_bf16_reduction_math_sdp),
             "mkldnn": (torch._C._get_mkldnn_enabled, torch._C._set_mkldnn_enabled)}
    if switch == "sdp_order":
        with sdpa_kernel([SDPBackend.MATH, SDPBackend.FLASH_ATTENTION], set_priority=True):
            assert capture_key.graph_key(gm, example_inputs) != base
    elif switch == "opt_einsum":
        before = b.opt_einsum.enabled
        b.opt_einsum.enabled = not before
        try:
            assert capture_key.graph_key(gm, example_inputs) != base
        finally:
            b.opt_einsum.enabled = before
    else:
        get, set_ = flips[switch]
        before = get()
        set_(not before)
        try:
            assert capture_key.graph_key(gm, example_inputs) != base
        finally:
            set_(before)
    assert capture_key.graph_key(gm, example_inputs) == base


@pytest.mark.parametrize("key_has_autocast", [True, False], ids=["key", "output_check"])
def test_ambient_autocast_gets_its_own_graph(cache, monkeypatch, key_has_autocast):
    """Dynamo leaves an autocast the call runs under out of its graph; the trace inserts its casts. The key
    holds it; were it missing, the last check of a hit (the f32 entry's outputs against Dynamo's bf16) would
    trace again."""
    from kiln import capture_key

    if not key_has_autocast:
        monkeypatch.setattr(capture_key, "_global_state", lambda: "")
    torch.manual_seed(0)
    model, x = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval(), torch.randn(4, 8)
    _compile(model, x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, how = _compile(model, x)
        with torch.no_grad():
            expected = model(x)
    assert how == ["one trace"]
    assert got.dtype == torch.bfloat16
    assert_close(got, expected)


def test_graphs_calling_aten_ops_are_cached(cache):
    """Dynamo keeps `torch.ops.aten.x(t)` as a call of the op's packet (falcon's `numpy_T`) or overload."""
    x = torch.randn(4, 8)
    for fn in (lambda t: torch.ops.aten.numpy_T(t) * 2, lambda t: torch.ops.aten.relu.default(t) + 1):
        gm, example_inputs = _dynamo_graph(fn, x)
        assert capture_key.graph_key(gm, example_inputs) is not None
        torch._dynamo.reset()
        _compile(fn, x)
        got, how = _compile(fn, x)
        assert how == ["one trace, from the capture cache"]
        assert_close(got, fn(x))


def _user_function(t):
    return t * 2


def test_graphs_calling_unnamed_functions_are_not_cached(cache):
    allowed = torch._dynamo.allow_in_graph(_user_function)
    gm, example_inputs = _dynamo_graph(lambda t: allowed(torch.relu(t)), torch.randn(4, 8))
    assert any(n.target is _user_function for n in gm.graph.nodes)
    assert capture_key.graph_key(gm, example_inputs) is None
    got, _ = _compile(lambda t: allowed(torch.relu(t)), torch.randn(4, 8))
    assert list(cache.glob("*.json")) == []


def test_damaged_entry_is_traced_again(cache):
    torch.manual_seed(0)
    model, x = Constants().eval(), torch.randn(4, 8)
    _compile(model, x)
    (entry,) = cache.glob("*.json")
    with torch.no_grad():
        expected = model(x)
    for damage in (b"{not json", b"[" * 100000, json.dumps({"format": 1, "capture": "one trace",
                                              "graph": {"nodes": [{"op": "call_function", "target": "aten::nope.x",
                                                                   "name": "a", "args": [], "kwargs": {}}]}}).encode()):
        entry.write_bytes(damage)
        got, how = _compile(model, x)
        assert how == ["one trace"]
        assert_close(got, expected)
        assert json.loads(entry.read_bytes())["format"] == capture_key.FORMAT  # rewritten


class CacheWrite(torch.nn.Module):
    """A static key/value cache's step: a buffer written in place, which only aot_autograd captures."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.register_buffer("cache", torch.zeros(4, 8))

    def forward(self, x, position):
        self.cache.index_copy_(0, position, self.proj(x))
        return self.cache.sum(0)


def test_a_graph_that_needs_aot_autograd_goes_there_at_once(cache, monkeypatch):
    from kiln import aten_capture

    x, position = torch.randn(1, 8), torch.tensor([2])
    model, reference = CacheWrite().eval(), CacheWrite().eval()
    reference.load_state_dict(model.state_dict())
    with torch.no_grad():
        expected = [reference(x, position).clone() for _ in range(2)]
    _, how = _compile(model, x, position)
    assert how == ["aot_autograd (the graph mutates an input)"]
    traces = []
    real = aten_capture.capture_inference_graph
    monkeypatch.setattr(aten_capture, "capture_inference_graph", lambda *a, **k: traces.append(1) or real(*a, **k))
    model.cache.zero_()
    got, how = _compile(model, x, position)
    assert how == ["aot_autograd (the graph mutates an input, from the capture cache)"] and traces == []
    assert_close(got, expected[0])
    assert_close(model.cache, reference.cache)


def test_off_writes_nothing(cache, monkeypatch):
    monkeypatch.setenv("KILN_CAPTURE_CACHE", "0")
    _, how = _compile(Constants().eval(), torch.randn(4, 8))
    assert how == ["one trace"] and list(cache.glob("*")) == []


def test_unwritable_folder_costs_only_the_cache(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("KILN_CAPTURE_CACHE", "1")
    monkeypatch.setenv("KILN_CAPTURE_CACHE_DIR", str(tmp_path / "file" / "captures"))
    torch.manual_seed(0)
    model, x = Constants().eval(), torch.randn(4, 8)
    for _ in range(2):
        got, how = _compile(model, x)
        assert how == ["one trace"]
        with torch.no_grad():
            assert_close(got, model(x))


def test_oldest_entries_go(cache, monkeypatch):
    monkeypatch.setattr(capture_cache, "MAX_ENTRIES", 2)
    for n in (3, 4, 5):
        _compile(lambda t: torch.relu(t) + 1, torch.randn(n, 8))
    assert len(list(cache.glob("*.json"))) == 2


def test_graph_data_round_trips_constants_exactly():
    from torch.fx.experimental.proxy_tensor import make_fx

    values = {"f32": torch.tensor([1 / 3, -0.0, float("inf"), 3.4e38]),
              "i64": torch.tensor([2**62 + 1, -7]), "flag": torch.tensor(True), "empty": torch.tensor([])}

    def f(x):
        return [x + values["f32"].sum() + values["i64"][0] + values["flag"] + values["empty"].sum()]

    gm = make_fx(f)(torch.randn(4))
    data = graph_serial.to_data(gm)
    back = graph_serial.from_data(json.loads(json.dumps(data)))
    constants = [n.target for n in gm.graph.nodes if n.op == "get_attr"]
    assert len(constants) == 4
    for name in constants:
        want, got = getattr(gm, name), getattr(back, name)
        assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)
    x = torch.randn(4)
    assert torch.equal(back(x)[0], gm(x)[0])


def test_graph_data_refuses_what_it_cannot_name():
    from torch.fx.experimental.proxy_tensor import make_fx

    big = torch.randn(2000)
    assert graph_serial.to_data(make_fx(lambda x: [x + big])(torch.randn(2000))) is None
    for bad in ({"nodes": [{"op": "call_module", "name": "m", "target": "m", "args": [], "kwargs": {}}]},
                {"nodes": [{"op": "call_function", "name": "m", "target": "os::system.default", "args": [],
                            "kwargs": {}}]},
                {"nodes": [{"op": "placeholder", "name": "x", "args": [], "kwargs": {},
                            "val": {"tensor": [[2], [1], 0, "Tensor", "cpu"]}}]},
                {"nodes": None}):
        with pytest.raises(ValueError):
            graph_serial.from_data(bad)
