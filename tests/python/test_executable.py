"""kiln's own graph API and the Executable call path: results against NumPy,
and clear errors that name the input, weight, op or option at fault."""

import numpy as np
import pytest
import torch

import kiln
from kiln.region import KilnRegion


def small_graph():
    g = kiln.Graph()
    x = g.input("x", "f32", [2, 3])
    w = g.weight("w", "f32", [4, 3])
    y = g.op("matmul", [x, g.op("permute", [w], {"dims": [1, 0]})[0]])[0]
    g.set_outputs([g.op("relu", [y])[0]])
    return g


def bound_small_graph(seed):
    """small_graph compiled with a random weight bound, and a random input: (exe, x, w)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3), dtype=np.float32)
    w = rng.standard_normal((4, 3), dtype=np.float32)
    exe = kiln.compile_graph(small_graph())
    exe.bind_weight("w", w)
    return exe, x, w


def test_graph_api_matches_numpy():
    exe, x, w = bound_small_graph(0)
    (out,) = exe(x)
    np.testing.assert_allclose(out, np.maximum(x @ w.T, 0), rtol=1e-6, atol=1e-6)
    assert exe.bound_weights()["w"] == w.ctypes.data  # by pointer, no copy


@pytest.mark.parametrize(
    "bad, fragment",
    [
        (np.zeros((2, 3), np.float64), "input 0 (%x) has dtype f64, expected f32"),
        (np.zeros((3, 2), np.float32), "input 0 (%x)"),
        (np.zeros((2, 3, 1), np.float32), "input 0 (%x)"),
        (np.zeros((6,), np.float32), "input 0 (%x)"),
    ],
)
def test_wrong_input_is_named(bad, fragment):
    exe = kiln.compile_graph(small_graph())
    exe.bind_weight("w", np.ones((4, 3), np.float32))
    with pytest.raises(kiln.Error, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        exe(bad)


def test_wrong_input_count_and_unbound_weight_are_named():
    exe = kiln.compile_graph(small_graph())
    with pytest.raises(kiln.Error, match="w"):
        exe(np.zeros((2, 3), np.float32))  # weight never bound
    exe.bind_weight("w", np.ones((4, 3), np.float32))
    with pytest.raises(kiln.Error, match="input"):
        exe.run([], [np.zeros((2, 4), np.float32)])
    with pytest.raises(kiln.Error, match="weight 'w'"):
        exe.bind_weight("w", np.ones((3, 4), np.float32))


def test_run_into_writes_outputs_by_address_and_checks_their_count():
    exe, x, w = bound_small_graph(1)
    out = np.full((2, 4), np.nan, np.float32)
    exe.run_into([x], [out.ctypes.data])
    np.testing.assert_allclose(out, np.maximum(x @ w.T, 0), rtol=1e-6, atol=1e-6)
    with pytest.raises(kiln.Error, match="expected 1 output addresses, got 2"):
        exe.run_into([x], [out.ctypes.data, out.ctypes.data])
    with pytest.raises(kiln.Error, match="output 0"):
        exe.run_into([x], [0])  # a null address is refused, not written


def test_run_at_takes_inputs_by_address_and_checks_their_count():
    exe, x, w = bound_small_graph(1)
    out = np.full((2, 4), np.nan, np.float32)
    exe.run_at([x.ctypes.data], [out.ctypes.data])
    np.testing.assert_allclose(out, np.maximum(x @ w.T, 0), rtol=1e-6, atol=1e-6)
    with pytest.raises(kiln.Error, match="expected 1 input addresses, got 0"):
        exe.run_at([], [out.ctypes.data])
    with pytest.raises(kiln.Error, match="input 0 has a null address"):
        exe.run_at([0], [out.ctypes.data])


def test_math_modes_follow_torchs_switches_and_reach_the_executable(monkeypatch):
    from kiln.executable import torch_math

    for matmul, conv in [(False, True), (True, False)]:
        monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", matmul)
        monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", conv)
        assert torch_math() == {"tf32_matmul": matmul, "tf32_conv": conv}
    exe = kiln.compile_graph(small_graph(), tf32_matmul=True, tf32_conv=True)
    assert "math tf32_matmul,tf32_conv" in exe.describe()
    assert "math" not in kiln.compile_graph(small_graph()).describe()


def test_wrong_device_is_named():
    exe = kiln.compile_graph(small_graph())
    exe.bind_weight("w", np.ones((4, 3), np.float32))
    meta = torch.empty((2, 3), device="meta")
    with pytest.raises((kiln.Error, BufferError, RuntimeError, TypeError)):
        exe.run([meta], [np.zeros((2, 4), np.float32)])


def test_unknown_op_attribute_and_dtype_errors():
    g = kiln.Graph()
    x = g.input("x", "f32", [2, 3])
    with pytest.raises(kiln.Error, match="unknown op 'frobnicate'"):
        g.op("frobnicate", [x])
    with pytest.raises(kiln.Error, match="has no attribute 'axis'"):
        g.op("softmax", [x], {"axis": 1})
    with pytest.raises(kiln.Error, match="unknown dtype 'f33'"):
        g.input("y", "f33", [1])
    with pytest.raises(kiln.Error, match="cannot broadcast"):
        g.op("add", [x, g.input("z", "f32", [4])])


def test_text_form_round_trips_through_python():
    g = small_graph()
    again = kiln.Graph.parse(g.text())
    assert again.text() == g.text()


def test_region_passes_the_inputs_it_checked_by_address_and_others_through_dlpack():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 3)).eval()
    ids = torch.tensor([[1, 2, 3]])
    program = kiln.compile(model, [ids])
    region = next(m for m in program.module.modules() if isinstance(m, KilnRegion))
    used = []
    for name in ("run_at", "run_into"):
        original = getattr(region.exe, name)
        setattr(region.exe, name, lambda *a, _original=original, _name=name: (used.append(_name), _original(*a))[1])
    with torch.no_grad():
        want = model(ids)
        assert torch.allclose(program(ids), want, atol=1e-6)
        assert used == ["run_at"]
        # The same values in a layout that differs only along a dim of size 1: not the planned strides
        # exactly, so DLPack's path (whose check allows it) takes it.
        wide = torch.tensor([[1, 2, 3, 4]])[:, :3]
        assert wide.stride() != ids.stride()
        assert torch.allclose(program(wide), want, atol=1e-6)
        assert used == ["run_at", "run_into"]


def test_region_executable_path_names_bad_inputs_and_leaves_weights_intact():
    """The executable path without Dynamo's guards: wrong inputs raise errors
    naming the input, and a failing call changes no parameter."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 3)).eval()
    ids = torch.tensor([[1, 2, 3]])
    program = kiln.compile(model, [ids])
    region = next(m for m in program.module.modules() if isinstance(m, KilnRegion))
    weights = [p.detach().clone() for p in model.parameters()]
    captured = {}
    forward = region.forward

    def spy(*args):
        captured["args"] = args
        return forward(*args)

    region.forward = spy
    with torch.no_grad():
        good = program(ids)
    args = list(captured["args"])
    (slot,) = [i for i, w in enumerate(region.arg_is_weight) if not w and not region.arg_is_dead[i]]
    with pytest.raises(kiln.Error, match="dtype f32, expected i64"):
        region(*args[:slot], ids.float(), *args[slot + 1 :])
    with pytest.raises(kiln.Error, match=r"input 0 \(%\w+\)"):
        region(*args[:slot], torch.tensor([[1, 2, 3, 4]]), *args[slot + 1 :])
    with pytest.raises(kiln.Error, match="out of range"):
        program(torch.tensor([[1, 2, 99]]))  # index past the embedding table
    for before, p in zip(weights, model.parameters()):
        assert torch.equal(before, p.detach())
    with torch.no_grad():
        assert torch.equal(program(ids), good)
        assert torch.allclose(model(ids), good, atol=1e-6)
