"""kiln.output_buffers: a region's outputs of one shape and dtype come from one allocation, yet each
call's outputs are fresh, disjoint tensors with the eager values, kept intact by later calls."""

from __future__ import annotations

import torch

import kiln  # noqa: F401  (registers the backend)
from kiln.output_buffers import OutputBuffers

from conftest import assert_close


def test_groups_share_one_block_and_do_not_overlap():
    specs = [((2, 3), torch.float32), ((4,), torch.int64), ((2, 3), torch.float32), ((), torch.float16),
             ((2, 3), torch.float32), ((0, 5), torch.float32), ((0, 5), torch.float32)]
    buffers = OutputBuffers(specs, torch.device("cpu"))
    blocks, addresses = buffers.allocate()
    assert len(blocks) == 4  # one per shape and dtype
    outputs = buffers.outputs(blocks)
    assert [(tuple(t.shape), t.dtype) for t in outputs] == specs
    assert addresses == [t.data_ptr() for t in outputs]
    assert all(t.is_contiguous() for t in outputs)
    same = [outputs[0], outputs[2], outputs[4]]
    assert len({t.untyped_storage().data_ptr() for t in same}) == 1  # one allocation for the group
    for k, t in enumerate(same):
        t.fill_(k)
    for k, t in enumerate(same):
        assert torch.equal(t, torch.full((2, 3), float(k)))  # disjoint bytes


def test_outputs_of_one_call_survive_the_next():
    # Eight outputs of one shape (as a decoder's key/value outputs), kept while the model runs again.
    def fn(x):
        return tuple(torch.tanh(x * (k + 1)) for k in range(8)) + (x.sum(-1),)

    compiled = torch.compile(fn, backend="kiln")
    x1, x2 = torch.randn(3, 16), torch.randn(3, 16)
    with torch.no_grad():
        compiled(x1)
        first = compiled(x1)
        kept = [t.clone() for t in first]
        second = compiled(x2)
        for got, want in zip(second, fn(x2)):
            assert_close(got, want, torch.float32)
        for got, want in zip(first, kept):
            assert torch.equal(got, want)  # the second call wrote elsewhere
        first[0].add_(1)  # a caller's in-place update touches that output only
        assert torch.equal(first[1], kept[1]) and torch.equal(first[0], kept[0] + 1)
