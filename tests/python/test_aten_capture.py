"""kiln.aten_capture: an inference graph captured in one trace, symbolic shapes included, is aot_autograd's
graph node for node; graphs that mutate inputs or return aliases go through aot_autograd and still behave as
in eager."""

import functools

import pytest
import torch

from conftest import assert_close, compile_and_report, tiny_gpt2
from kiln.aten_capture import capture_inference_graph
from kiln.decompositions import decomposition_table
from kiln.dynamo_backend import kiln_backend


class Block(torch.nn.Module):
    """What the models feed the capture: a packed qkv split into heads, layer norm, softmax, gelu, a
    convolution with batch norm, reshapes and transposes."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)
        self.norm = torch.nn.LayerNorm(16)
        self.conv = torch.nn.Conv2d(2, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)

    def forward(self, x, image):
        b, s, e = x.shape
        q, k, v = (t.view(b, s, 2, 8).transpose(1, 2) for t in self.qkv(self.norm(x)).split(e, dim=2))
        scores = torch.softmax(q @ k.transpose(-1, -2) / 8 ** 0.5, dim=-1)
        mixed = (scores @ v).transpose(1, 2).reshape(b, s, e)
        return torch.nn.functional.gelu(mixed) + x, torch.relu(self.bn(self.conv(image))).flatten(1)


def _dynamo_graph(fn, *inputs, dynamic=False):
    """Dynamo's graph of `fn` and its example inputs."""
    seen = []

    def record(gm, example_inputs):
        seen.append((gm, example_inputs))
        return gm.forward

    with torch.no_grad():
        torch.compile(fn, backend=record, dynamic=dynamic)(*inputs)
    assert len(seen) == 1
    return seen[0]


def _aot_graph(gm, example_inputs):
    from torch._dynamo.backends.common import aot_autograd

    seen = []

    def record(graph, _):
        seen.append(graph)
        return graph

    with torch.no_grad():
        aot_autograd(fw_compiler=record, decompositions=decomposition_table())(gm, example_inputs)
    return seen[0]


def _signature(gm):
    """The graph as (op, target, arguments by node position, shape, dtype) per node."""
    position = {node: i for i, node in enumerate(gm.graph.nodes)}

    def arg(a):
        if isinstance(a, torch.fx.Node):
            return ("node", position[a])
        if isinstance(a, (list, tuple)):
            return tuple(arg(x) for x in a)
        return repr(a)

    rows = []
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        shape = (tuple(val.shape), val.dtype) if isinstance(val, torch.Tensor) else None
        target = node.target if node.op != "placeholder" else None
        rows.append((node.op, str(target), arg(node.args), arg(tuple(sorted(node.kwargs.items()))), shape))
    return rows


def _capture(gm, example_inputs):
    """(the captured graph or None, "one trace" or why not)."""
    with torch.no_grad():
        return capture_inference_graph(gm, example_inputs, decomposition_table())


def test_one_trace_gives_aot_autograds_graph():
    model = Block().eval()
    gm, example_inputs = _dynamo_graph(model, torch.randn(2, 5, 16), torch.randn(1, 2, 6, 6))
    captured, how = _capture(gm, example_inputs)
    assert how == "one trace"
    assert _signature(captured) == _signature(_aot_graph(gm, example_inputs))


def test_model_captured_in_one_trace_matches_eager_and_the_report_says_so():
    model, x, image = Block().eval(), torch.randn(2, 5, 16), torch.randn(1, 2, 6, 6)
    got, report = compile_and_report(model, x, image)
    with torch.no_grad():
        expected = model(x, image)
    assert [g.capture for g in report.graphs] == ["one trace"]
    assert "captured by one trace" in str(report)
    assert_close(got, expected)


class InPlaceAndGradMode(torch.nn.Module):
    """In-place ops on intermediates and a grad-mode switch inside the graph: one trace takes both."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        y.mul_(2)
        with torch.enable_grad():
            z = torch.relu_(y * 3)
        return z, y.sum()


def test_intermediate_mutation_and_grad_switch_captured_in_one_trace():
    model, x = InPlaceAndGradMode().eval(), torch.randn(2, 4)
    gm, example_inputs = _dynamo_graph(model, x)
    with torch.no_grad():
        assert _capture(gm, example_inputs)[1] == "one trace"
        assert not torch.is_grad_enabled()  # the graph's enable_grad ended with the capture
        got = torch.compile(model, backend=kiln_backend)(x)
        expected = model(x)
    assert_close(list(got), list(expected))


class Counter(torch.nn.Module):
    """Updates a buffer in place on every call, as a training-mode batch norm does its statistics."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls.add_(1)
        return x * self.calls


def test_input_mutation_goes_through_aot_autograd_and_updates_the_buffer():
    model, reference, x = Counter(), Counter(), torch.randn(3)
    assert _capture(*_dynamo_graph(Counter(), x)) == (None, "the graph mutates an input")
    got, report = compile_and_report(model, x)
    assert [g.capture for g in report.graphs] == ["aot_autograd (the graph mutates an input)"]
    assert_close(got, reference(x))
    compiled = torch.compile(model, backend=kiln_backend)
    with torch.no_grad():
        for _ in range(2):
            assert_close(compiled(x), reference(x))
    assert model.calls.item() == 3


def test_output_aliasing_an_input_goes_through_aot_autograd_and_stays_a_view():
    def fn(x):
        return x.view(-1), x * 2

    x = torch.randn(2, 3)
    assert _capture(*_dynamo_graph(fn, x)) == (None, "an output aliases an input or another output")
    with torch.no_grad():
        flat, doubled = torch.compile(fn, backend=kiln_backend)(x)
    assert flat.data_ptr() == x.data_ptr() and flat.shape == (6,)
    assert_close(doubled, x * 2)


def test_outputs_aliasing_each_other_go_through_aot_autograd():
    def fn(x):
        y = x + 1
        return y, y.view(-1)

    x = torch.randn(2, 3)
    assert _capture(*_dynamo_graph(fn, x)) == (None, "an output aliases an input or another output")
    with torch.no_grad():
        got = torch.compile(fn, backend=kiln_backend)(x)
    assert_close(list(got), list(fn(x)))


def _captures_inside_dynamo(fn, *calls):
    """The one-trace capture and aot_autograd's graph of the last graph Dynamo compiles while `fn` is called on
    each argument tuple of `calls`, both made inside Dynamo's compile (so over its shape environment)."""
    seen = []

    def record(gm, example_inputs):
        with torch.no_grad():
            seen.append((_capture(gm, example_inputs), _aot_graph(gm, example_inputs)))
        return gm.forward

    compiled = torch.compile(fn, backend=record)
    with torch.no_grad():
        for args in calls:
            compiled(*args)
    return seen[-1]


@pytest.mark.parametrize("case", ["block", "gpt2"])
def test_symbolic_shapes_captured_in_one_trace_give_aot_autograds_graph(case):
    """A second size makes Dynamo's graph symbolic (SymInt inputs, fake tensors with symbolic sizes): the one
    trace keeps the symbols and is aot_autograd's graph node for node."""
    torch.manual_seed(0)
    if case == "block":
        fn = Block().eval()
        calls = [(torch.randn(2, n, 16), torch.randn(1, 2, 6, 6)) for n in (5, 7)]
    else:
        fn = tiny_gpt2().forward
        calls = [(torch.randint(0, 96, (2, n)),) for n in (5, 7)]
    (captured, how), aot = _captures_inside_dynamo(fn, *calls)
    assert how == "one trace"
    placeholders = [n.meta["val"] for n in captured.graph.nodes if n.op == "placeholder"]
    assert any(isinstance(v, torch.SymInt) for v in placeholders)
    assert _signature(captured) == _signature(aot)


def test_symbolic_graph_compiled_from_one_trace_matches_eager():
    def fn(x):
        return torch.relu(x) + x.shape[0]

    reports = []
    compiled = torch.compile(fn, backend=functools.partial(kiln_backend, reports=reports), dynamic=True)
    with torch.no_grad():
        for rows in (4, 7, 4):
            x = torch.randn(rows, 3)
            assert_close(compiled(x), fn(x))
    assert [r.capture for r in reports] == ["one trace"]


def test_inference_mode_and_half_precision_take_the_one_trace():
    model, x, image = Block().eval().to(torch.bfloat16), torch.randn(2, 5, 16), torch.randn(1, 2, 6, 6)
    x, image = x.to(torch.bfloat16), image.to(torch.bfloat16)
    reports = []
    compiled = torch.compile(model, backend=functools.partial(kiln_backend, reports=reports))
    with torch.inference_mode():
        got, expected = compiled(x, image), model(x, image)
    assert [g.capture for g in reports] == ["one trace"]
    assert_close(list(got), list(expected))
