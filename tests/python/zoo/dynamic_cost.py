"""Measures what a new batch size costs under dynamic shapes (kiln.specialize)
against the first compile, for the zoo's resnet18 and BERT:

    PYTHONPATH=<kiln> python tests/python/zoo/dynamic_cost.py

First compile: the first call on a symbolic graph (Dynamo, AOT, kiln). New
size: the first call at a new batch size minus a warm call at that size.
Static recompile: what a new size costs without dynamic shapes (a fresh
compile at that size)."""

from __future__ import annotations

import pathlib
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from zoo import run  # noqa: E402


def _timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def measure(name: str) -> dict:
    model, (x,) = run.build(name, batch=2)
    make = (lambda b: torch.randn(b, *x.shape[1:])) if x.is_floating_point() else (
        lambda b: torch.randint(3, 100, (b, *x.shape[1:])))
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="kiln", dynamic=True)
    out = {}
    with torch.no_grad():
        out["first compile (batch 2)"] = _timed(compiled, make(2))
        for b in (3, 8):
            first = _timed(compiled, make(b))
            warm = _timed(compiled, make(b))
            out[f"new batch {b}"] = first - warm
        torch._dynamo.reset()
        static = torch.compile(model, backend="kiln", dynamic=False)
        first = _timed(static, make(8))
        out["static recompile (batch 8)"] = first - _timed(static, make(8))
    return out


if __name__ == "__main__":
    for name in sys.argv[1:] or ["tv_resnet18", "bert"]:
        for what, seconds in measure(name).items():
            print(f"{name}\t{what}\t{seconds:.3f} s", flush=True)
