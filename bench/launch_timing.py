"""When a backend's call reaches its CUDA-graph launch: per call, the host's time from the call to the
launch, the launch itself, and from the launch's return to the call's return, beside the call's latency
(CUDA events, the device idle at the start, as run_one.py's median) and its device time (the same with
the host's work hidden behind a sleep kernel). Latency minus device time is what the device waited for
the host; this says which part of the call it waited for. For kiln it also splits the call at kiln's
own steps: where the region's forward starts, its output allocation, its launch, where it returns.

    python bench/launch_timing.py WORKLOAD [--backends kiln,reduce-overhead] [--iters 200]

A diagnostic for the GPU machine, next to bench/run.py; not a test."""

from __future__ import annotations

import statistics
import time

import torch

from run_one import device_latencies, diagnostic_main, warmed_up


def _timed_points(backend: str) -> list[tuple[object, str, str]]:
    """(owner, attribute, label) of the functions whose entry and return each call marks; the launch last."""
    if backend == "kiln":
        from kiln.executable import Executable
        from kiln.output_buffers import OutputBuffers
        from kiln.region import KilnRegion

        return [(KilnRegion, "forward", "region"), (OutputBuffers, "take", "outputs"),
                (Executable, "run_at", "launch")]
    return [(torch.cuda.CUDAGraph, "replay", "launch")]


def _install(points, marks: dict) -> callable:
    """Wraps each point so that it appends (entry, return) host times to marks[label]; returns the undo."""
    originals = []
    for owner, name, label in points:
        original = getattr(owner, name)
        originals.append((owner, name, original))

        def timed(*args, _original=original, _label=label, **kwargs):
            before = time.perf_counter()
            result = _original(*args, **kwargs)
            marks.setdefault(_label, []).append((before, time.perf_counter()))
            return result

        setattr(owner, name, timed)
    return lambda: [setattr(owner, name, original) for owner, name, original in originals]


def profile(backend: str, workload: str, iters: int, top: int) -> str:
    del top
    marks: dict = {}
    points = _timed_points(backend)
    restore = _install(points, marks)  # before compiling: kiln's direct call keeps the region's bound forward
    try:
        fn, inputs = warmed_up(backend, workload, 10)
        with torch.inference_mode():
            device = statistics.median(device_latencies(fn, inputs, iters))
            latency, parts = [], {}
            for _ in range(iters):
                marks.clear()
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t0 = time.perf_counter()
                start.record()
                fn(*inputs)
                t1 = time.perf_counter()
                end.record()
                end.synchronize()
                latency.append(start.elapsed_time(end))
                if "launch" not in marks:
                    continue
                for label in marks:
                    first, last = marks[label][0][0], marks[label][-1][1]
                    parts.setdefault(f"to {label}", []).append((first - t0) * 1e3)
                    parts.setdefault(label, []).append((last - first) * 1e3)
                parts.setdefault("after launch", []).append((t1 - marks["launch"][-1][1]) * 1e3)
                if "region" in marks:
                    parts.setdefault("after region", []).append((t1 - marks["region"][-1][1]) * 1e3)
    finally:
        restore()
    med = statistics.median
    head = f"== {backend} on {workload}, ms per call (median of {iters}): latency {med(latency):.3f}, device {device:.3f}"
    if not parts:
        return f"{head}; no graph launch seen"
    split = ", ".join(f"{name} {med(values):.3f}" for name, values in parts.items())
    return f"{head}, waited {med(latency) - device:.3f}; host: {split}"


if __name__ == "__main__":
    diagnostic_main(__doc__, profile, "kiln,reduce-overhead", 200, 0)
