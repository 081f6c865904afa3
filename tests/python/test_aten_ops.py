"""Every ATen overload kiln lowers, compiled with torch.compile(backend=kiln)
and compared with eager: broadcasting, non-contiguous inputs, odd sizes,
several dtypes, keepdim and negative dims. Each case also asserts through
kiln.explain that its ops were lowered, not left to PyTorch (cases that fall
back on purpose name the reason they expect).

A few overloads never reach a Dynamo graph (core ATen decomposes them, or
they are CompositeImplicit and vanish while tracing); their cases build the
ATen graph directly (`direct=True`) and go through the same partitioner,
importer and compiler (kiln.compile_fx.compile_fx_graph)."""

from __future__ import annotations

import zlib

import pytest
import torch

import kiln
from kiln import _kiln
from kiln.dynamo_backend import kiln_backend

from aten_cases import CASES, Case
from conftest import assert_close


# ---- the tests -------------------------------------------------------------------------------


def _params():
    for c in CASES:
        marks = [pytest.mark.xfail(strict=True, reason=c.xfail)] if c.xfail else []
        yield pytest.param(c, id=c.name, marks=marks)


def _inputs(c: Case):
    return c.inputs(torch.Generator().manual_seed(zlib.crc32(c.name.encode())))


def _run_direct(c: Case, inputs):
    """Builds the ATen graph of c.fn as written (no decomposition) and compiles it like a Dynamo graph."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    from kiln.compile_fx import compile_fx_graph
    from kiln.options import Options
    from kiln.report import Report

    if c.dispatch:
        from torch.fx.experimental.proxy_tensor import make_fx

        gm = make_fx(c.fn)(*inputs)
    else:
        gm = torch.fx.symbolic_trace(c.fn)
    FakeTensorProp(gm, FakeTensorMode(allow_non_fake_inputs=True)).propagate(*inputs)
    module, report = compile_fx_graph(gm, set(), torch.device("cpu"), Options())
    return module(*inputs), Report([report])


def _check_report(c: Case, report) -> None:
    reasons = {d.target: d.reason for d in report.fallbacks}
    unexpected = {t: r for t, r in reasons.items() if t not in c.fallback}
    assert not unexpected, f"fell back to PyTorch: {unexpected}\n{report}"
    for target, fragment in c.fallback.items():
        assert target in reasons, f"expected {target} to fall back ({fragment!r})\n{report}"
        assert fragment in reasons[target], f"{target} fell back for {reasons[target]!r}, expected {fragment!r}"
    lowered = report.lowered_ops()
    missing = [t for t in c.targets if t not in lowered]
    assert not missing, f"not lowered: {missing}\n{report}"
    assert c.fallback or lowered, f"nothing was lowered\n{report}"


@pytest.mark.parametrize("c", list(_params()))
def test_aten_op(c: Case):
    inputs = _inputs(c)
    with torch.no_grad():
        expected = c.fn(*inputs)
        if c.direct:
            actual, report = _run_direct(c, inputs)
        else:
            actual = torch.compile(c.fn, backend=kiln_backend)(*inputs)
    assert_close(actual, expected, c.tol)
    if not c.direct:
        torch._dynamo.reset()
        report = kiln.explain(c.fn, *inputs)
    _check_report(c, report)


def test_every_aten_target_has_a_case():
    covered = {t for c in CASES for t in c.targets}
    missing = sorted(set(_kiln.aten_targets()) - covered)
    assert not missing, f"ATen overloads kiln lowers without a case here: {missing}"


def test_case_names_are_unique():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
