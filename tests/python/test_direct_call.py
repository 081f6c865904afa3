"""kiln.direct_call: a compiled graph that is one kiln region is called without nn.Module's machinery,
with the same results as calling the module, and only in that case."""

from __future__ import annotations

import functools

import torch

from kiln.dynamo_backend import kiln_backend
from kiln.direct_call import direct_call

from conftest import assert_close


def _compiled_modules(fn, inputs):
    """fn compiled by kiln; the GraphModules compile_fx_graph returned, by wrapping kiln's compiler."""
    import kiln.compile_fx as compile_fx

    modules, original = [], compile_fx.compile_fx_graph

    def keep(*args, **kwargs):
        module, report = original(*args, **kwargs)
        modules.append(module)
        return module, report

    compile_fx.compile_fx_graph = keep
    try:
        compiled = torch.compile(fn, backend=functools.partial(kiln_backend, reports=[]))
        with torch.no_grad():
            compiled(*inputs)
    finally:
        compile_fx.compile_fx_graph = original
    return compiled, modules


def _assert_calls_match_eager(compiled, fn, x, calls=3):
    """Several calls (the first through the module, the rest direct), each equal to eager's."""
    with torch.no_grad():
        for _ in range(calls):
            assert_close(compiled(x), fn(x), torch.float32)


def test_one_region_with_several_outputs():
    def fn(x, y):
        s = torch.relu(x @ y)
        return s, x, s.sum(-1), y * 2

    x, y = torch.randn(4, 5), torch.randn(5, 3)
    compiled, modules = _compiled_modules(fn, (x, y))
    assert len(modules) == 1
    run = direct_call(modules[0])
    assert run is not None
    with torch.no_grad():
        first = run(x, y)  # the first call goes through the module (its hooks)
        for _ in range(3):
            got = run(x, y)
            for a, b in zip(got, modules[0](x, y)):
                assert_close(a, b, torch.float32)
        for a, b in zip(compiled(x, y), fn(x, y)):
            assert_close(a, b, torch.float32)
    assert len(first) == 3  # the returned input is Dynamo's to return, not the graph's


def test_a_graph_with_a_fallback_op_keeps_the_module_call():
    def fn(x):
        return torch.fft.fft(x).real + 1  # fft: no kiln op, so the graph has torch code around the region

    x = torch.randn(8)
    compiled, modules = _compiled_modules(fn, (x,))
    assert len(modules) == 1 and direct_call(modules[0]) is None
    with torch.no_grad():
        assert_close(compiled(x), fn(x), torch.float32)


def test_traced_scalar_and_empty_constants_become_literals():
    # torch.tensor(...) inside forward reaches kiln as a traced constant (get_attr of _tensor_constantN):
    # a 0-dim one and an empty one (a key/value cache's start, concatenated) become literals, so the
    # graph is still one region called directly, with eager's results.
    def fn(x):
        start = torch.tensor([])
        return torch.cat([start, x.flatten()]) * torch.tensor(3.0) + torch.tensor(-1.5)

    x = torch.randn(2, 3)
    compiled, modules = _compiled_modules(fn, (x,))
    assert len(modules) == 1
    assert not any(n.op == "get_attr" for n in modules[0].graph.nodes), modules[0].graph
    assert direct_call(modules[0]) is not None
    _assert_calls_match_eager(compiled, fn, x)


def test_a_constant_attribute_argument_keeps_the_direct_call():
    # A traced constant with several values stays a weight (a get_attr the region reads); the direct call
    # passes the attribute's tensor itself.
    def fn(x):
        return x * torch.tensor([1.0, -2.0, 3.0])

    x = torch.randn(4, 3)
    compiled, modules = _compiled_modules(fn, (x,))
    assert len(modules) == 1 and any(n.op == "get_attr" for n in modules[0].graph.nodes), modules[0].graph
    assert direct_call(modules[0]) is not None
    _assert_calls_match_eager(compiled, fn, x)


def test_an_integer_constant_beyond_a_double_stays_exact():
    # 2**60 + 1 has no exact double: it stays a weight (kiln's literals hold doubles), and the result is exact.
    def fn(x):
        return x + torch.tensor(2**60 + 1)

    x = torch.arange(4)
    compiled, modules = _compiled_modules(fn, (x,))
    with torch.no_grad():
        assert torch.equal(compiled(x), fn(x))
