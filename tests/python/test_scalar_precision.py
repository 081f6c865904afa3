"""Numbers in f16/bf16 arithmetic read at torch's precision (Note [Scalars in f16 and bf16] in
src/builder/graph_builder.cpp): mul and div by a number (or a 0-d tensor constant) the dtype cannot hold
compute in f32 with the number in f32; add, sub and pow use it rounded to the dtype; an alpha is
rounded and a + alpha * b computed in f32, as torch's CPU kernels do. Compared bit for bit with eager
on the CPU (torch's CUDA kernels have not been compared yet)."""

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
def test_matches_eager_bit_for_bit_on_cpu(op, dtype):
    torch.manual_seed(0)
    x = (torch.randn(4096) * 10).to(dtype)
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
