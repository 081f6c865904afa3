"""Numbers in f16/bf16 arithmetic read at the precision torch's kernels on the graph's device read them
(Note [Scalars in f16 and bf16] in src/builder/graph_builder.cpp). On the CPU: mul and div by a number
(or a 0-d tensor constant) the dtype cannot hold compute in f32 with the number in f32; add, sub and pow
use it rounded; an alpha is rounded and a + alpha * b computed in f32. On CUDA: add and sub read the
number in f32 too, an alpha is read in f32, and x / number is x times the number's f32 reciprocal.
Compared bit for bit with eager on each device; the CUDA rules also against their formula, on the CPU."""

from __future__ import annotations

import pytest
import torch

from conftest import compile_and_report

OPS = {
    "mul": lambda x: x * 0.1,
    "mul_left": lambda x: 0.7978845608028654 * x,
    "div": lambda x: x / 0.3,
    "add": lambda x: x + 0.3,
    "sub": lambda x: x - 0.3,
    "rsub": lambda x: 0.3 - x,
    "pow": lambda x: x.abs() ** 0.3,
    "chain": lambda x: (x * 0.1 + 0.3) / 0.7,
    "tensor_constant": lambda x: x * torch.tensor(0.1),
    "add_alpha": lambda x: torch.add(x[:2048], x[2048:], alpha=0.1),
    "sub_alpha": lambda x: torch.sub(x[:2048], x[2048:], alpha=0.3),
    "add_number_alpha": lambda x: torch.add(x, 0.3, alpha=0.1),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("op", list(OPS))
def test_matches_eager_bit_for_bit(op, dtype, device):
    torch.manual_seed(0)
    x = (torch.randn(4096) * 10).to(device, dtype)
    fn = OPS[op]
    with torch.no_grad():
        expected = fn(x)
    got, report = compile_and_report(fn, x)
    assert not report.fallbacks, str(report)
    differ = (got != expected).sum().item()
    assert differ == 0, f"{differ} of {expected.numel()} elements differ from eager"


def test_numbers_the_dtype_holds_keep_the_plain_form():
    # 0.5 and 8.0 are f16 numbers: the product stays in f16, the form the pattern passes match.
    x = torch.randn(64).half()
    _, report = compile_and_report(lambda x: x * 0.5 / 8.0, x)
    text = "\n".join(r.exe._native.graph_text() for g in report.graphs for r in g.region_modules)
    assert "f32" not in text, text


def _run(graph, *inputs: torch.Tensor) -> torch.Tensor:
    import kiln

    out = torch.empty_like(inputs[0])
    kiln.compile_graph(graph).run(list(inputs), [out])
    return out


def _f32(number: float) -> torch.Tensor:
    return torch.tensor(number, dtype=torch.float32)


# What torch's CUDA kernels compute (measured with bench/scalar_precision.py on an H200), as f32 formulas.
CUDA_RULES = {
    "div": ("aten.div.Tensor", {"other": 0.3}, lambda x: x.float() * (1 / _f32(0.3))),
    "add": ("aten.add.Tensor", {"other": 0.3}, lambda x: x.float() + _f32(0.3)),
    "sub": ("aten.sub.Tensor", {"other": 0.3}, lambda x: x.float() - _f32(0.3)),
    "rsub": ("aten.rsub.Scalar", {"other": 0.3}, lambda x: _f32(0.3) - x.float()),
    "add_number_alpha": ("aten.add.Tensor", {"other": 0.3, "alpha": 0.1}, lambda x: x.float() + _f32(0.1) * _f32(0.3)),
}


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("rule", list(CUDA_RULES))
def test_cuda_rules_compute_torch_cuda_formula(rule, dtype):
    # The graph is built with CUDA's rules and run on the CPU backend: the same f32 arithmetic.
    import kiln

    if dtype == "f32" and rule != "div":
        pytest.skip("f32 reads every number in f32 on both devices")
    torch_dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    target, args, formula = CUDA_RULES[rule]
    g = kiln.Graph()
    g.set_eager_device("cuda")
    x = g.input("x", dtype, [4096])
    g.set_outputs(g.aten(target, {"self": x, **args}))
    torch.manual_seed(0)
    data = (torch.randn(4096) * 10).to(torch_dtype)
    got = _run(g, data)
    expected = formula(data).to(torch_dtype)
    differ = (got != expected).sum().item()
    assert differ == 0, f"{differ} of 4096 elements differ from CUDA's formula\n{g}"


def test_cuda_alpha_is_read_in_f32():
    import kiln

    g = kiln.Graph()
    g.set_eager_device("cuda")
    a, b = g.input("a", "f16", [4096]), g.input("b", "f16", [4096])
    g.set_outputs(g.aten("aten.add.Tensor", {"self": a, "other": b, "alpha": 0.1}))
    torch.manual_seed(0)
    x, y = (torch.randn(2, 4096) * 10).half()
    got = _run(g, x, y)
    expected = (x.float() + _f32(0.1) * y.float()).half()
    assert (got != expected).sum().item() == 0
    # The CPU's rule (alpha rounded to f16 first) gives another answer: the test tells them apart.
    assert (got != (x.float() + _f32(float(torch.tensor(0.1).half())) * y.float()).half()).sum().item() > 0


def test_unknown_eager_device_is_refused():
    import kiln

    with pytest.raises(Exception, match="unknown device 'tpu'"):
        kiln.Graph().set_eager_device("tpu")
