"""Fake tensors made straight from a shape, strides, storage offset, dtype and device: the node values
(meta["val"]) of a graph read back from the capture cache (kiln.graph_serial) and of a shape
specialization (kiln.specialize), without running any op under the fake mode."""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode


def fake_tensor(mode: FakeTensorMode, shape, stride, offset: int, dtype: torch.dtype, device) -> FakeTensor:
    # A meta tensor wrapped directly: a tenth of the time of an empty_strided under the fake mode.
    meta = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
    if offset:
        extent = offset + 1 + sum((s - 1) * st for s, st in zip(shape, stride) if s > 0)
        meta = torch.empty(extent, dtype=dtype, device="meta").as_strided(shape, stride, offset)
    return FakeTensor(mode, meta, torch.device(device))
