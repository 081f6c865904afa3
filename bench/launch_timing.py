"""When a backend's call reaches its CUDA-graph launch: per call, the host's time from the call to the
launch, the launch itself, and from the launch's return to the call's return, beside the call's latency
(CUDA events, the device idle at the start, as run_one.py's median) and its device time (the same with
the host's work hidden behind a sleep kernel). Latency minus device time is what the device waited for
the host; this says which part of the call it waited for.

    python bench/launch_timing.py WORKLOAD [--backends kiln,reduce-overhead] [--iters 200]

A diagnostic for the GPU machine, next to bench/run.py; not a test."""

from __future__ import annotations

import statistics
import time

import torch

from run_one import device_latencies, diagnostic_main, warmed_up


def _launch_hooks(backend: str, marks: list):
    """Wraps the backend's graph launch so that it appends (before, after) host times to marks."""
    if backend == "kiln":
        from kiln.executable import Executable as owner
        name = "run_into"
    else:
        owner, name = torch.cuda.CUDAGraph, "replay"
    original = getattr(owner, name)

    def timed(*args, **kwargs):
        before = time.perf_counter()
        result = original(*args, **kwargs)
        marks.append((before, time.perf_counter()))
        return result

    setattr(owner, name, timed)
    return lambda: setattr(owner, name, original)


def profile(backend: str, workload: str, iters: int, top: int) -> str:
    del top
    fn, inputs = warmed_up(backend, workload, 10)
    marks: list = []
    with torch.inference_mode():
        device = statistics.median(device_latencies(fn, inputs, iters))
        restore = _launch_hooks(backend, marks)
        pre, launch, post, latency = [], [], [], []
        try:
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
                if marks:
                    pre.append((marks[0][0] - t0) * 1e3)
                    launch.append((marks[-1][1] - marks[0][0]) * 1e3)
                    post.append((t1 - marks[-1][1]) * 1e3)
        finally:
            restore()
    med = statistics.median
    if not pre:
        return f"== {backend} on {workload}: no graph launch seen; latency {med(latency):.3f} ms, device {device:.3f}"
    return (f"== {backend} on {workload}, ms per call (median of {iters}): latency {med(latency):.3f}, device {device:.3f}, "
            f"waited {med(latency) - device:.3f}; host: to the launch {med(pre):.3f}, the launch {med(launch):.3f}, "
            f"after it {med(post):.3f} ({len(marks)} launch(es) a call)")


if __name__ == "__main__":
    diagnostic_main(__doc__, profile, "kiln,reduce-overhead", 200, 0)
