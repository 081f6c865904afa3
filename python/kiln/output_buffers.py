"""Allocation of a region's outputs on each call, in as few allocations as possible.

Every call returns fresh output tensors (the caller may keep them across calls). Outputs of the same
shape and dtype are carved from one allocation: GPT-2's 24 key/value outputs are one torch.empty
before the graph launch and one unbind after it, instead of 24 allocations before it (on CUDA, tens of
microseconds of host time per call that the device waited for). The outputs of a group share a
storage, so the block lives as long as any of them is referenced; each is a contiguous view of its own
disjoint bytes.

On CUDA the next call's outputs are allocated after this call's launch, while the device runs it, when
they are small (at most KEEP_NEXT_MAX_BYTES in all): the next call starts its launch without an
allocation (one or two torch.empty before it: microseconds of host time that the device waited for).
They are fresh all the same: a set is handed out once. One set is held between calls, on the stream it
was allocated for; a call on another stream allocates its own."""

from __future__ import annotations

import torch

KEEP_NEXT_MAX_BYTES = 8 << 20


class OutputBuffers:
    def __init__(self, specs: list[tuple[tuple[int, ...], torch.dtype]], device: torch.device):
        self.count = len(specs)
        self.device = device
        positions: dict[tuple, list[int]] = {}
        for k, spec in enumerate(specs):
            positions.setdefault(spec, []).append(k)
        # (shape, dtype, output positions, the bytes between consecutive outputs of the group)
        self.groups = [(shape, dtype, where, _nbytes(shape, dtype)) for (shape, dtype), where in positions.items()]
        self.nbytes = sum(nbytes * len(where) for _, _, where, nbytes in self.groups)
        self.keeps_next = device.type == "cuda" and self.nbytes <= KEEP_NEXT_MAX_BYTES
        # At most one (stream, blocks, addresses) allocated ahead; a list because its pop() is atomic, so two
        # threads calling one region can never be handed the same set.
        self._ready: list = []

    def take(self, stream: int) -> tuple[list[torch.Tensor], list[int]]:
        """This call's outputs: the set allocated ahead for `stream`, else a fresh allocation."""
        try:
            ready_stream, blocks, addresses = self._ready.pop()
        except IndexError:
            return self.allocate()
        return (blocks, addresses) if ready_stream == stream else self.allocate()

    def prepare_next(self, stream: int) -> None:
        """Allocates the next call's outputs now (call it after the launch) where that is kept."""
        if not self.keeps_next or self._ready:
            return
        if self.device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            return  # a caller's own graph capture: nothing allocated here outlives it unseen
        try:
            self._ready.append((stream, *self.allocate()))
        except torch.OutOfMemoryError:
            pass  # only ahead of need: the next call allocates its own, and reports a shortage there

    def allocate(self) -> tuple[list[torch.Tensor], list[int]]:
        """One fresh allocation per group, and each output's address in it (all a launch needs)."""
        blocks: list = []
        addresses: list = [0] * self.count
        for shape, dtype, where, nbytes in self.groups:
            if len(where) == 1:
                t = torch.empty(shape, dtype=dtype, device=self.device)
                blocks.append(t)
                addresses[where[0]] = t.data_ptr()
                continue
            block = torch.empty((len(where), *shape), dtype=dtype, device=self.device)
            blocks.append(block)
            base = block.data_ptr()
            for k, position in enumerate(where):
                addresses[position] = base + k * nbytes
        return blocks, addresses

    def outputs(self, blocks: list[torch.Tensor]) -> list[torch.Tensor]:
        """The outputs in output order, from allocate()'s blocks. A group's views are made here, after the
        launch that writes them: GPT-2's 24 key/value views no longer come before it."""
        outputs: list = [None] * self.count
        for (_, _, where, _), block in zip(self.groups, blocks):
            if len(where) == 1:
                outputs[where[0]] = block
                continue
            for position, view in zip(where, block.unbind(0)):
                outputs[position] = view
        return outputs


def _nbytes(shape: tuple[int, ...], dtype: torch.dtype) -> int:
    n = dtype.itemsize
    for d in shape:
        n *= d
    return n
