"""The decomposition table kiln traces with (Dynamo's graphs, torch.export's programs)."""

from __future__ import annotations

import functools

import torch


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    from torch._decomp import core_aten_decompositions

    table = core_aten_decompositions()
    table.pop(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default, None)
    return table


def decomposition_table() -> dict:
    """torch's core ATen decomposition table, built once per process (40-100 ms a build on the dev CPU,
    which every compile and recompile paid), as a fresh copy, so no caller can change the cached one.

    Less one entry: the CPU flash-attention op stays whole, as the CUDA attention ops do (kiln's importer
    takes every SDPA overload as its `attention` op). Decomposed, it was traced through the math path's
    dozen ops per attention for fuse_attention to put back together: 0.2 s of each transformer's capture on
    the dev CPU (GPT-2 0.81 -> 0.62 s), for the same kernels."""
    return dict(_table())
