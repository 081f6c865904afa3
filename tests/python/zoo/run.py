"""Runs one zoo model: eager, then compiled with backend="kiln"; returns the
largest difference, the tolerance it is held to, what fell back to PyTorch
(ATen overload -> reason) and the compile time."""

from __future__ import annotations

import dataclasses
import functools
import time

import torch

from . import text, vision

NAMES = vision.NAMES + text.NAMES

# A model's output is compared with eager's at tolerance atol + rtol * max|eager|.
# Mostly relative: several random-weight models have outputs far below 1
# (EfficientNet's are near 1e-14), so the absolute part only guards against 0,
# except in f16, whose smallest step is 2**-24 (its subnormals): outputs near
# 1e-7 (mnasnet, inception_v3 at full size) differ by that step, so f16's
# absolute part is two of those steps.
TOLERANCE = {
    torch.float32: (1e-10, 2e-3),
    torch.bfloat16: (1e-8, 6e-2),
    torch.float16: (2.0**-23, 2e-2),
}


@dataclasses.dataclass
class ZooResult:
    name: str
    dtype: torch.dtype
    max_diff: float
    allowed: float
    fallbacks: dict  # ATen overload -> reason (first seen)
    compile_seconds: float  # the first compiled call: Dynamo, the ATen capture and kiln
    kiln_seconds: float  # kiln's part of it (partition, import, compile)
    graphs: int

    @property
    def passed(self) -> bool:
        return self.max_diff <= self.allowed


def build(name: str, batch: int = 1, full: bool = False):
    module = vision if name in vision.NAMES else text
    return module.build(name, batch=batch, full=full)


def _cast_inputs(inputs, dtype):
    return tuple(x.to(dtype) if x.is_floating_point() else x for x in inputs)


def run(name: str, dtype: torch.dtype = torch.float32, device: str = "cpu", full: bool = False,
        batch: int = 1) -> ZooResult:
    from kiln.dynamo_backend import kiln_backend

    model, inputs = build(name, batch=batch, full=full)
    model = model.to(device=device, dtype=dtype)
    inputs = _cast_inputs(tuple(x.to(device) for x in inputs), dtype)
    reports = []
    compiled = torch.compile(model, backend=functools.partial(kiln_backend, reports=reports))
    with torch.no_grad():
        expected = model(*inputs)
        start = time.perf_counter()
        actual = compiled(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, (
        f"{name}: kiln gave {tuple(actual.shape)} {actual.dtype}, eager {tuple(expected.shape)} {expected.dtype}")
    atol, rtol = TOLERANCE[dtype]
    diff = (actual.float() - expected.float()).abs().max().item()
    allowed = atol + rtol * expected.float().abs().max().item()
    fallbacks = {}
    for graph in reports:
        for d in graph.fallbacks:
            fallbacks.setdefault(d.target, d.reason)
    kiln_seconds = sum(g.compile_seconds for g in reports)
    return ZooResult(name, dtype, diff, allowed, fallbacks, seconds, kiln_seconds, len(reports))


def as_record(r: ZooResult) -> dict:
    """One result as a JSON-able dict (zoo/table.py reads these)."""
    return dict(name=r.name, dtype=str(r.dtype).removeprefix("torch."), passed=r.passed, max_diff=r.max_diff,
                allowed=r.allowed, fallbacks=r.fallbacks, compile_seconds=round(r.compile_seconds, 2),
                kiln_seconds=round(r.kiln_seconds, 3), graphs=r.graphs)
