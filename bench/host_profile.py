"""Where a backend's host time per call goes on one workload: each call starts
with the device idle (as run_one.py's host_ms), and the calls are profiled on
the host (cProfile: Python functions, with the CUDA runtime calls made from
C++ counted in their callers) and through torch.profiler's CPU activity (CUDA
runtime API calls such as cudaGraphLaunch, by total host time).

    python bench/host_profile.py WORKLOAD [--backends kiln,reduce-overhead] [--iters 200] [--top 20]

A diagnostic for the GPU machine, next to bench/run.py; not a test."""

from __future__ import annotations

import collections
import cProfile
import io
import pstats
import time

import torch

from run_one import diagnostic_main, kiln_call_stats, warmed_up


def profile(backend: str, workload: str, iters: int, top: int) -> str:
    fn, inputs = warmed_up(backend, workload, 10)
    with torch.inference_mode():
        host, prof = [], cProfile.Profile()
        for _ in range(iters):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            prof.enable()
            fn(*inputs)
            prof.disable()
            host.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as tp:
            for _ in range(iters):
                torch.cuda.synchronize()
                fn(*inputs)
            torch.cuda.synchronize()
    host.sort()
    lines = [f"== {backend} on {workload}: host ms per call (under cProfile) median {host[len(host) // 2] * 1e3:.3f}"]
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
    lines += [line for line in text.getvalue().splitlines() if line.strip()][-(top + 1):]
    totals, counts = collections.Counter(), collections.Counter()
    for e in tp.events():
        if e.name.startswith("cuda") or e.name.startswith("cu"):
            totals[e.name] += e.cpu_time_total
            counts[e.name] += 1
    lines.append("-- CUDA runtime calls on the host, us per call of the model:")
    for name, us in totals.most_common(top):
        lines.append(f"  {us / iters:9.1f} us  x{counts[name] / iters:6.1f}  {name}")
    if backend == "kiln":
        lines.append(f"-- kiln's CUDA graphs: {kiln_call_stats()}")
    return "\n".join(lines)


if __name__ == "__main__":
    diagnostic_main(__doc__, profile, "kiln,reduce-overhead", 200, 20)
