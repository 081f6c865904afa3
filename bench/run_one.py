"""One benchmark measurement in a fresh process: one backend on one workload.

python bench/run_one.py BACKEND WORKLOAD  ->  prints one JSON line with the
median latency (CUDA events, after warm-up), the device's time per call (the same events with the host's
work before the first launch hidden), the host's time per call, compile time (the first call),
device memory over the eager model at the compile peak and after, and the max
abs difference against eager. Backends: eager, inductor, reduce-overhead, kiln."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

import torch

from workloads import DIAGNOSTIC_WORKLOADS, WORKLOADS


KILN_REPORTS: list = []  # kiln's compile reports in this process (their regions give the call statistics)


def compile_for(backend: str, model):
    if backend == "eager":
        return model
    if backend == "inductor":
        return torch.compile(model)
    if backend == "reduce-overhead":
        return torch.compile(model, mode="reduce-overhead")
    if backend == "kiln":
        import functools

        from kiln.dynamo_backend import kiln_backend

        return torch.compile(model, backend=functools.partial(kiln_backend, reports=KILN_REPORTS))
    raise SystemExit(f"unknown backend {backend!r}")


def warmed_up(backend: str, workload: str, calls: int):
    """(fn, inputs): the workload, seeded, compiled for `backend` and called `calls` times under
    inference_mode (the diagnostics call it there too), the device then idle."""
    torch.manual_seed(0)
    model, inputs = DIAGNOSTIC_WORKLOADS[workload]()
    with torch.inference_mode():
        fn = compile_for(backend, model)
        for _ in range(calls):
            fn(*inputs)
        torch.cuda.synchronize()
    return fn, inputs


def diagnostic_main(doc: str, profile, backends: str, iters: int, top: int) -> None:
    """The command line of the diagnostics (kernel_profile.py, host_profile.py): WORKLOAD [--backends
    a,b] [--iters N] [--top N], printing profile(backend, workload, iters, top) per backend."""
    import argparse

    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", choices=sorted(DIAGNOSTIC_WORKLOADS))
    parser.add_argument("--backends", default=backends)
    parser.add_argument("--iters", type=int, default=iters)
    parser.add_argument("--top", type=int, default=top)
    args = parser.parse_args()
    for backend in args.backends.split(","):
        print(profile(backend, args.workload, args.iters, args.top), flush=True)


def first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "logits"):
        return out.logits
    if isinstance(out, (list, tuple)):
        return first_tensor(out[0])
    return out.last_hidden_state


def kiln_call_stats() -> dict:
    """kiln's CUDA-graph statistics summed over its regions: calls, captures, updates (re-recorded because
    an address changed), replays, slot calls (replays whose inputs and outputs were copied through static
    slots), and why a region was not captured (a call that launches every kernel
    from the host costs far more host time than a replay)."""
    counted = ("calls", "graph_captures", "graph_updates", "graph_replays", "slot_calls")
    total = {"regions": 0, **dict.fromkeys(counted, 0)}
    reasons = set()
    for graph in KILN_REPORTS:  # one GraphReport per compiled graph
        for region in graph.region_modules:
            stats = region.exe.call_stats()
            total["regions"] += 1
            for key in counted:
                total[key] += stats[key]
            if stats["uncaptured_reason"]:
                reasons.add(stats["uncaptured_reason"])
    total["uncaptured_reasons"] = sorted(reasons)
    return total


def kiln_stage_seconds(compile_s: float) -> dict:
    """Where kiln's first call went: seconds between its stages, summed over graphs; "torch" is the rest
    (Dynamo tracing, the ATen capture, guards), of which "torch after kiln" came between kiln's return and
    the first call (the "called" stage)."""
    import kiln

    spent: dict = {}
    for trace in kiln.memory_report().traces:
        for before, stage in zip(trace.stages, trace.stages[1:]):
            spent[stage.name] = spent.get(stage.name, 0.0) + stage.seconds - before.seconds
    torch_s = spent.pop("called", 0.0)  # from kiln's return to the first call: torch's wrappers and guards
    spent = {name: round(s, 3) for name, s in spent.items()}
    spent["torch"] = round(compile_s - sum(spent.values()), 3)
    spent["torch after kiln"] = round(torch_s, 3)
    return spent


def latency_ms(fn, inputs, sleep_cycles: int = 0) -> float:
    """One call's milliseconds between CUDA events recorded before and after it; with sleep_cycles, a
    sleep kernel queued ahead of the start event keeps the device busy while the host issues the call."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if sleep_cycles:
        torch.cuda._sleep(sleep_cycles)
    start.record()
    fn(*inputs)
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def device_latencies(fn, inputs, iters: int) -> list[float]:
    """Milliseconds from the call's first kernel to its last, per call: latency_ms with the device kept
    busy (a sleep kernel as long as the call's host time, four times over) until the host has issued the
    call, so the host's work before its first launch is not counted. Latency minus this is what the host
    adds to a call in front of the device's work."""
    cycles = int(4 * host_ms(fn, inputs) * 1e-3 * 2.0e9)  # at 2 GHz (an H200's SMs run at up to 1.98)
    return [latency_ms(fn, inputs, cycles) for _ in range(iters)]


def host_ms(fn, inputs) -> float:
    """One call's host milliseconds, the device idle at its start: the call's Python and launch cost."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn(*inputs)
    elapsed = (time.perf_counter() - t0) * 1e3
    torch.cuda.synchronize()
    return elapsed


def _python_loop():
    d = {}
    for i in range(200):
        d[i] = (i, str(i))
    return d


def host_speed_us() -> float:
    """How fast the host runs plain Python right now: the best of five timings of a fixed loop, in
    microseconds. On the 2-core development VM the same process measured anywhere from 30 to 61 us
    from one third of a second to the next (2026-12-04), so a row's host time can move with the
    machine and not with the code; rows record this before and after their timed calls."""
    import timeit

    return round(min(timeit.repeat(_python_loop, number=50, repeat=5)) / 50 * 1e6, 1)


def host_placement() -> dict:
    """Where this process ran and what else did, for the bimodal host time per call (docs/benchmarks.md,
    runs 8 and 12): the CPU its thread was last on, how many CPUs it may use, the host's one-minute load
    average, the tasks runnable right now (this one included), and the other processes that used the most
    CPU time since they started (name and seconds; run 12's load averages of 1-4 came from somewhere)."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # fields from the third (state) on; the name may hold spaces
    with open("/proc/loadavg") as f:
        runnable = int(f.read().split()[3].split("/")[0])
    return {"cpu": int(fields[36]), "cpus_allowed": len(os.sched_getaffinity(0)), "load1": os.getloadavg()[0],
            "runnable": runnable, "busiest": _busiest_processes(3)}


def _busiest_processes(count: int) -> list:
    """[(name, CPU seconds)] of the `count` other processes with the most user and system time."""
    ticks = os.sysconf("SC_CLK_TCK")
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                head, rest = f.read().rsplit(")", 1)
        except OSError:  # gone since the listing
            continue
        fields = rest.split()
        found.append((head.split("(", 1)[1], round((int(fields[11]) + int(fields[12])) / ticks, 1)))
    return sorted(found, key=lambda p: -p[1])[:count]


def main(backend: str, workload: str, warmup: int = 10, iters: int = 50) -> dict:
    torch.manual_seed(0)
    model, inputs = WORKLOADS[workload]()
    with torch.inference_mode():
        reference = first_tensor(model(*inputs)).float()
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn = compile_for(backend, model)
        t0 = time.perf_counter()
        out = first_tensor(fn(*inputs)).clone()  # CUDA-graph backends reuse their output buffers
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        peak = torch.cuda.max_memory_allocated() - base
        for _ in range(warmup):
            fn(*inputs)
        torch.cuda.synchronize()
        after = torch.cuda.memory_allocated() - base
        speed_before = host_speed_us()
        times = [latency_ms(fn, inputs) for _ in range(iters)]
        device = device_latencies(fn, inputs, iters)
        host = [host_ms(fn, inputs) for _ in range(iters)]
        placement = {**host_placement(), "python_loop_us": [speed_before, host_speed_us()]}
        diff = (out.float() - reference).abs().max().item()
    extra = {"kiln_stage_s": kiln_stage_seconds(compile_s), "kiln_call_stats": kiln_call_stats()} \
        if backend == "kiln" else {}
    return {
        **extra,
        "backend": backend, "workload": workload, "median_ms": statistics.median(times),
        "device_ms": statistics.median(device), "host_ms": statistics.median(host),
        "compile_s": compile_s, "peak_over_eager_mib": peak / 2**20, "after_over_eager_mib": after / 2**20,
        "max_abs_diff": diff, "host": placement,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])), flush=True)
