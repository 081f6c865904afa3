"""torch.compile(backend="kiln") behaviour: registration, fallback, graph
breaks, grad mode, options, calls with bad inputs, and kiln.compile (AOT)."""

import subprocess
import sys
import warnings

import pytest
import torch

import kiln
from conftest import assert_close
from kiln.dynamo_backend import kiln_backend


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        return torch.softmax(self.fc2(torch.relu(self.fc1(x))), dim=-1)


def test_backend_is_registered_without_importing_kiln():
    code = (
        "import sys, torch\n"
        "m = torch.nn.Linear(4, 3).eval()\n"
        "x = torch.randn(2, 4)\n"
        "with torch.no_grad():\n"
        "    y = torch.compile(m, backend='kiln')(x)\n"
        "assert torch.allclose(y, m(x), atol=1e-5)\n"
        "print('kiln' in torch._dynamo.list_backends(), 'kiln' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == ["True", "True"]


def test_importing_kiln_changes_no_torch_global_setting():
    code = (
        "import torch\n"
        "before = (torch.get_default_dtype(), torch.is_grad_enabled(), torch.get_num_threads(),\n"
        "          torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,\n"
        "          torch.get_float32_matmul_precision(), torch.are_deterministic_algorithms_enabled())\n"
        "import kiln, kiln.dynamo_backend, kiln.partition\n"
        "after = (torch.get_default_dtype(), torch.is_grad_enabled(), torch.get_num_threads(),\n"
        "         torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,\n"
        "         torch.get_float32_matmul_precision(), torch.are_deterministic_algorithms_enabled())\n"
        "assert before == after, (before, after)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_mlp_matches_eager_under_no_grad_and_inference_mode(mode):
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(5, 16)
    context = torch.no_grad if mode == "no_grad" else torch.inference_mode
    with context():
        expected = model(x)
        got = torch.compile(model, backend=kiln_backend)(x)
    assert_close(got, expected)
    assert kiln.explain(model, x).fallbacks == []


def test_grad_enabled_falls_back_to_eager_with_one_warning():
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(3, 16)
    compiled = torch.compile(model, backend=kiln_backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = compiled(x)
        y2 = compiled(x)
    messages = [str(w.message) for w in caught if "kiln compiles inference graphs only" in str(w.message)]
    assert len(messages) == 1
    y.sum().backward()  # still trainable: eager autograd graph
    assert model.fc1.weight.grad is not None
    assert_close(y2, model(x))


class WithUnsupported(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        h = torch.cumprod(h, dim=1)  # no kiln lowering: falls back to PyTorch
        return torch.relu(h) * 2


def test_unsupported_op_falls_back_and_output_is_correct():
    torch.manual_seed(0)
    model = WithUnsupported().eval()
    x = torch.randn(4, 8)
    with torch.no_grad():
        expected = model(x)
        got = torch.compile(model, backend=kiln_backend)(x)
    assert_close(got, expected)
    report = kiln.explain(model, x)
    assert [d.target for d in report.fallbacks] == ["aten.cumprod.default"]
    assert "no kiln lowering for aten.cumprod.default" in report.fallbacks[0].reason
    assert any(d.target == "aten.addmm.default" for d in report.lowered)
    assert "cumprod" in str(report)


class WithGraphBreak(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 8)
        self.fc2 = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        torch._dynamo.graph_break()
        return self.fc2(h) + self.fc1.bias  # fc1.bias is read in both graphs


def test_graph_break_gives_two_kiln_graphs_and_correct_output():
    torch.manual_seed(0)
    model = WithGraphBreak().eval()
    x = torch.randn(3, 8)
    with torch.no_grad():
        expected = model(x)
        got = torch.compile(model, backend=kiln_backend)(x)
    assert_close(got, expected)
    report = kiln.explain(model, x)
    assert len(report.graphs) == 2
    assert report.fallbacks == []


class _ReturnsInputsAndRepeats(torch.nn.Module):
    """Outputs that the partition must route: a region value twice, a graph input, two region values."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x, y):
        h = self.fc(x)
        r = torch.relu(h)
        return r, y, h + y, r


def test_a_graph_kiln_takes_whole_is_one_region_and_routes_every_output():
    torch.manual_seed(0)
    model, x, y = _ReturnsInputsAndRepeats().eval(), torch.randn(3, 8), torch.randn(3, 8)
    reports = []
    compiled = torch.compile(model, backend=lambda gm, ex: kiln_backend(gm, ex, reports=reports))
    with torch.no_grad():
        got, want = compiled(x, y), model(x, y)
    assert len(got) == len(want) == 4
    for g, w in zip(got, want):
        assert_close(g, w)
    assert got[1] is y or torch.equal(got[1], y)
    assert len(reports) == 1 and len(reports[0].region_modules) == 1
    assert all(d.lowered for d in reports[0].decisions)


def test_non_contiguous_inputs():
    torch.manual_seed(0)
    model = MLP().eval()
    base = torch.randn(16, 10)
    x = base.t()[1:6]  # [5, 16], strides (1, 10)
    assert not x.is_contiguous()
    with torch.no_grad():
        got = torch.compile(model, backend=kiln_backend)(x)
        expected = model(x)
    assert_close(got, expected)


@pytest.mark.parametrize("width", [7, 100_000])  # the broadcast folded at compile time, or too large to fold
def test_broadcast_of_a_constant_slice_matches_eager(width):
    """Positions as transformers builds them for a packed-sequence check: a slice of a concatenated
    constant (not contiguous), broadcast. Folding the slice made a contiguous literal that the broadcast
    read with the slice's strides (GPT-2 decoding on CUDA failed to compile)."""

    def positions(x):
        p = torch.arange(3, device=x.device).unsqueeze(0).expand(2, -1)
        return x + torch.cat([p - 1, p], -1)[:, 1:2].expand(2, x.shape[1])

    x = torch.randn(2, width)
    assert torch.equal(torch.compile(positions, backend=kiln_backend)(x), positions(x))


def test_unknown_option_lists_valid_ones():
    with pytest.raises(ValueError) as info:
        kiln.Options.from_user({"devise": "cpu"})
    message = str(info.value)
    assert "'devise'" in message
    for name in ("device", "precision", "cuda_graphs", "fold", "verbose"):
        assert name in message


def test_unknown_option_through_torch_compile_raises():
    model = MLP().eval()
    compiled = torch.compile(model, backend=kiln_backend, options={"bogus": 1})
    with torch.no_grad(), pytest.raises(Exception) as info:
        compiled(torch.randn(2, 16))
    assert "unknown kiln option(s) 'bogus'" in str(info.value)


@pytest.mark.parametrize(
    "options, fragment",
    [
        ({"precision": "fp8"}, "precision='fp8'"),
        ({"device": "tpu"}, "device='tpu'"),
        ({"verbose": "yes"}, "verbose='yes'"),
        ({"fold": "sometimes"}, "fold='sometimes'"),
        ({"cuda_graph_new_addresses": "copy"}, "cuda_graph_new_addresses='copy'"),
    ],
)
def test_bad_option_values_are_named(options, fragment):
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(")):
        kiln.Options.from_user(options)


def test_verbose_logs_the_report(caplog):
    model = MLP().eval()
    with torch.no_grad(), caplog.at_level("WARNING", logger="kiln"):
        torch.compile(model, backend=kiln_backend, options={"verbose": True})(torch.randn(2, 16))
    assert "ATen nodes lowered" in caplog.text


def test_aot_compile_through_export_matches_eager_and_sees_updates():
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(4, 16)
    program = kiln.compile(model, [x])
    with torch.no_grad():
        assert_close(program(x), model(x))
        model.fc1.weight.mul_(0.5)
        assert_close(program(x), model(x))
    assert program.report.fallbacks == []
    with pytest.raises(TypeError, match="takes 1 inputs, got 2"):
        program(x, x)
