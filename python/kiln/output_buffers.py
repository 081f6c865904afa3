"""Allocation of a region's outputs on each call, in as few allocations as possible.

Every call returns fresh output tensors (the caller may keep them across calls). Outputs of the same
shape and dtype are carved from one allocation: GPT-2's 24 key/value outputs are one torch.empty
before the graph launch and one unbind after it, instead of 24 allocations before it (on CUDA, tens of
microseconds of host time per call that the device waited for). The outputs of a group share a
storage, so the block lives as long as any of them is referenced; each is a contiguous view of its own
disjoint bytes."""

from __future__ import annotations

import torch


class OutputBuffers:
    def __init__(self, specs: list[tuple[tuple[int, ...], torch.dtype]], device: torch.device):
        self.count = len(specs)
        self.device = device
        positions: dict[tuple, list[int]] = {}
        for k, spec in enumerate(specs):
            positions.setdefault(spec, []).append(k)
        # (shape, dtype, output positions, the bytes between consecutive outputs of the group)
        self.groups = [(shape, dtype, where, _nbytes(shape, dtype)) for (shape, dtype), where in positions.items()]

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
