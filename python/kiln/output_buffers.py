"""Allocation of a region's outputs on each call, in as few allocations as possible.

Every call returns fresh output tensors (the caller may keep them across calls). Outputs of the same
shape and dtype are carved from one allocation: GPT-2's 24 key/value outputs are one torch.empty and
one unbind instead of 24 allocations, which on CUDA is tens of microseconds of host time per call
before the graph launch. The outputs of a group share a storage, so the block lives as long as any of
them is referenced; each is a contiguous view of its own disjoint bytes."""

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
        """Fresh outputs in output order, and each one's address."""
        outputs: list = [None] * self.count
        addresses: list = [0] * self.count
        for shape, dtype, where, nbytes in self.groups:
            if len(where) == 1:
                t = torch.empty(shape, dtype=dtype, device=self.device)
                outputs[where[0]], addresses[where[0]] = t, t.data_ptr()
                continue
            block = torch.empty((len(where), *shape), dtype=dtype, device=self.device)
            base = block.data_ptr()
            for k, (position, view) in enumerate(zip(where, block.unbind(0))):
                outputs[position], addresses[position] = view, base + k * nbytes
        return outputs, addresses


def _nbytes(shape: tuple[int, ...], dtype: torch.dtype) -> int:
    n = dtype.itemsize
    for d in shape:
        n *= d
    return n
