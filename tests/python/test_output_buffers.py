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


def test_a_set_allocated_ahead_is_handed_out_once_and_only_on_its_stream():
    buffers = OutputBuffers([((2, 3), torch.float32), ((4,), torch.int64)], torch.device("cpu"))
    assert not buffers.keeps_next  # ahead of time on CUDA only, where the launch does not wait for it
    buffers.keeps_next = True
    first, _ = buffers.take(7)  # nothing ready: a fresh allocation
    buffers.prepare_next(7)
    buffers.prepare_next(7)  # one set at most is held
    assert len(buffers._ready) == 1
    ready = [t.data_ptr() for t in buffers._ready[0][1]]
    second, addresses = buffers.take(7)
    assert [t.data_ptr() for t in second] == ready and addresses == [t.data_ptr() for t in buffers.outputs(second)]
    third, _ = buffers.take(7)  # handed out once: the next take allocates again
    assert {t.data_ptr() for t in third}.isdisjoint(ready)
    buffers.prepare_next(7)
    other, _ = buffers.take(8)  # another stream's call does not use a set allocated for stream 7
    assert {t.data_ptr() for t in other}.isdisjoint(t.data_ptr() for t in buffers.outputs(third))
    assert buffers._ready == []
    assert first is not second


def test_only_small_cuda_outputs_are_allocated_ahead():
    from kiln.output_buffers import KEEP_NEXT_MAX_BYTES

    small = OutputBuffers([((1, 128, 768), torch.float16)], torch.device("cuda"))
    large = OutputBuffers([((KEEP_NEXT_MAX_BYTES // 2 + 1,), torch.float16)], torch.device("cuda"))
    assert small.keeps_next and not large.keeps_next
    assert small.nbytes == 128 * 768 * 2
