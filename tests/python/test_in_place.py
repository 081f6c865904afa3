"""kiln.in_place: a graph whose only mutations are in-place ops on unaliased intermediates is captured by
a plain trace with those ops made functional, and gives the functionalized trace's (and aot_autograd's)
graph node for node; a write through a view, a view read after a write, an in-place op whose functional
form promotes, or a write into an input goes to the functionalized trace or aot_autograd; a copy into a
new tensor stays a new tensor; and every case computes what eager computes."""

import functools

import pytest
import torch

from conftest import assert_close
from kiln.aten_capture import capture_inference_graph
from kiln.decompositions import decomposition_table
from kiln.dynamo_backend import kiln_backend
from kiln.in_place import functional_form
from test_aten_capture import _aot_graph, _capture, _dynamo_graph, _signature


class Bottleneck(torch.nn.Module):
    """ResNet's residual block: ReLU(inplace=True) after each batch norm and `out += identity`; and a
    masked_fill_, which the decomposition table turns into a `where` and a `copy_` into the tensor."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = torch.nn.Conv2d(4, 4, 1), torch.nn.BatchNorm2d(4)
        self.conv2, self.bn2 = torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.BatchNorm2d(4)
        self.relu = torch.nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x
        return self.relu(out), (out * 2).masked_fill_(x > 1.5, 0.25).sum()


def _view_before_write(x):
    y = x * 2
    flat = y.view(-1)  # taken before the write, read after it: it must see the relu
    y.relu_()
    return flat + 1, y


def _write_through_select(x):
    y = x + 1
    y[0].mul_(3)  # a write through a view of y (no setitem for the graph scan to see)
    return y * 2


def _write_through_setitem(x):
    y = x - 1
    y[:, 1] = 0.5
    return y.exp()


def _copy_of_the_input(x):
    buf = torch.empty_like(x)
    buf.copy_(x)  # the result is a new tensor, not x
    return buf


def _copy_of_a_view(x):
    buf = torch.zeros(4, 3)
    buf.copy_(x.t())
    return buf, x + 1


def _copy_read_twice(x):
    y = x * 2
    buf = torch.zeros(3, 4)
    buf.copy_(y)
    buf.add_(1)
    return buf, y


@pytest.mark.parametrize("fn", [_copy_of_the_input, _copy_of_a_view, _copy_read_twice])
def test_copies_into_new_tensors_stay_new_tensors(fn):
    x = torch.randn(3, 4)
    with torch.no_grad():
        got = torch.compile(fn, backend=kiln_backend)(x)
    got = list(got) if isinstance(got, tuple) else [got]
    expected = fn(x)
    assert_close(got, list(expected) if isinstance(expected, tuple) else [expected])
    assert len({t.data_ptr() for t in got}) == len(got)  # no output is another
    before = x.clone()
    for t in got:
        t.add_(1)
    assert torch.equal(x, before)  # nor the input, nor a view of it


def _input_written_by_a_function(x):
    torch.relu_(x)  # a call_function, not a method: only the traced graph shows it writes an input
    return x * 2


def _functionalized_capture(gm, example_inputs):
    with torch.no_grad():
        return capture_inference_graph(gm, example_inputs, decomposition_table(), plain=False)


def test_in_place_ops_on_intermediates_give_the_functionalized_graph():
    model, x = Bottleneck().eval(), torch.randn(2, 4, 5, 5)
    gm, example_inputs = _dynamo_graph(model, x)
    plain, how = _capture(gm, example_inputs)
    assert how == "one trace"
    functionalized, how = _functionalized_capture(gm, example_inputs)
    assert how == "one functionalized trace"
    assert _signature(plain) == _signature(functionalized) == _signature(_aot_graph(gm, example_inputs))
    targets = {str(n.target) for n in plain.graph.nodes}
    assert "aten.relu.default" in targets and "aten.relu_.default" not in targets
    assert not {"aten.add_.Tensor", "aten.copy_.default"} & targets


def test_model_with_in_place_ops_matches_eager():
    model, x = Bottleneck().eval(), torch.randn(2, 4, 5, 5)
    reports = []
    compiled = torch.compile(model, backend=functools.partial(kiln_backend, reports=reports))
    with torch.no_grad():
        got, expected = compiled(x), model(x)
    assert [g.capture for g in reports] == ["one trace"]
    assert_close(list(got), list(expected))


def _promoting_add(x):
    y = x.to(torch.float16) * 2
    y.add_(x)  # stays f16 in place; the functional add would give f32
    return y


@pytest.mark.parametrize("fn", [_view_before_write, _write_through_select, _write_through_setitem, _promoting_add])
def test_writes_a_plain_trace_cannot_express_take_the_functionalized_trace(fn):
    x = torch.randn(3, 4)
    assert _capture(*_dynamo_graph(fn, x))[1] == "one functionalized trace"
    reports = []
    with torch.no_grad():
        got = torch.compile(fn, backend=functools.partial(kiln_backend, reports=reports))(x)
    assert [g.capture for g in reports] == ["one functionalized trace"]
    expected = fn(x)
    assert_close(list(got) if isinstance(got, tuple) else got, list(expected) if isinstance(expected, tuple) else expected)
    assert [t.dtype for t in (got if isinstance(got, tuple) else [got])] == \
        [t.dtype for t in (expected if isinstance(expected, tuple) else [expected])]


def test_an_input_written_in_place_goes_through_aot_autograd():
    x = torch.randn(3, 4)
    assert _capture(*_dynamo_graph(_input_written_by_a_function, x.clone())) == (None, "the graph mutates an input")
    mine, reference = x.clone(), x.clone()
    with torch.no_grad():
        got = torch.compile(_input_written_by_a_function, backend=kiln_backend)(mine)
    assert_close(got, _input_written_by_a_function(reference))
    assert_close(mine, reference)  # the input was written as in eager


def test_functional_forms():
    aten = torch.ops.aten
    table = decomposition_table()
    assert functional_form(aten.relu_.default, table) is aten.relu.default
    assert functional_form(aten.add_.Tensor, table) is aten.add.Tensor
    assert functional_form(aten.copy_.default, table) is aten.copy.default
    assert functional_form(aten.hardtanh_.default, table) is aten.hardtanh.default
    assert functional_form(aten.relu.default, table) is None  # not in place
    assert functional_form(aten.add.out, table) is None  # writes its out= argument
    assert functional_form(aten.masked_fill_.Scalar, table) is None  # the functional trace decomposes masked_fill
