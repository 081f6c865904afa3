"""kiln.decompositions: torch's core ATen table less the CPU flash-attention op, which reaches kiln whole
(kiln's importer takes it as its attention op) instead of as the math path's matmuls and softmax."""

import pytest
import torch

from conftest import assert_close
from kiln.decompositions import decomposition_table
from kiln.dynamo_backend import kiln_backend
from test_aten_capture import _capture, _dynamo_graph


def _attention(q, k, v, mask):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask) * 2


@pytest.mark.parametrize("masked", [False, True])
def test_cpu_flash_attention_reaches_kiln_whole_and_matches_eager(masked):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 7, 8, generator=g) for _ in range(3))
    mask = torch.randn(7, 7, generator=g) if masked else None
    captured, how = _capture(*_dynamo_graph(_attention, q, k, v, mask))
    targets = [str(n.target) for n in captured.graph.nodes]
    assert how == "one trace"
    assert targets.count("aten._scaled_dot_product_flash_attention_for_cpu.default") == 1
    assert not any("softmax" in t or t == "aten.bmm.default" for t in targets)
    with torch.no_grad():
        got = torch.compile(_attention, backend=kiln_backend)(q, k, v, mask)
    assert_close(got, _attention(q, k, v, mask))


def test_every_call_gets_its_own_copy_of_the_table():
    first = decomposition_table()
    first.clear()
    table = decomposition_table()
    assert torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default not in table
    assert torch.ops.aten.masked_fill.Scalar in table  # the rest of the core table is kept
