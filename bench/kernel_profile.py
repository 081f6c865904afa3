"""Where a backend spends GPU time on one workload: the kernels of a few
calls, by total device time (torch.profiler), and the time per call.

    python bench/kernel_profile.py WORKLOAD [--backends eager,kiln] [--iters 20] [--top 15]

A diagnostic for the GPU machine, next to bench/run.py; not a test."""

from __future__ import annotations

import collections

import torch

from run_one import diagnostic_main, warmed_up


def device_times(fn, inputs, iters: int) -> tuple[collections.Counter, collections.Counter]:
    """Device microseconds and launches by kernel name over `iters` calls of fn(*inputs), warmed up."""
    with torch.inference_mode():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                fn(*inputs)
            torch.cuda.synchronize()
    totals, counts = collections.Counter(), collections.Counter()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            totals[e.name] += e.device_time
            counts[e.name] += 1
    return totals, counts


def profile(backend: str, workload: str, iters: int, top: int) -> str:
    fn, inputs = warmed_up(backend, workload, 5)
    totals, counts = device_times(fn, inputs, iters)
    busy = sum(totals.values()) / iters / 1000
    lines = [f"== {backend} on {workload}: {busy:.3f} ms of kernels per call, {sum(counts.values()) / iters:.0f} per call"]
    for name, us in totals.most_common(top):
        lines.append(f"  {us / iters:9.1f} us/call  x{counts[name] / iters:5.1f}  {name[:110]}")
    return "\n".join(lines)


if __name__ == "__main__":
    diagnostic_main(__doc__, profile, "eager,kiln", 20, 15)
