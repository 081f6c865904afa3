"""The GPU benchmark (issue 4): one fresh process per backend and workload,
side by side, written as a table into docs/benchmarks.md.

    python bench/run.py [--backends eager,inductor,reduce-overhead,kiln] [--workloads a,b] [--processes N]
                        [--out docs/benchmarks.md]

Not a test: run it on a GPU machine."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).parent
BACKENDS = ["eager", "inductor", "reduce-overhead", "kiln"]


def environment() -> str:
    import torch

    gpu = torch.cuda.get_device_name()
    driver = subprocess.run(
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout.strip()
    return f"{datetime.date.today()}, {gpu}, driver {driver}, torch {torch.__version__}, CUDA {torch.version.cuda}"


def measure_once(backend: str, workload: str, timeout: int, env=None) -> dict:
    try:
        proc = subprocess.run([sys.executable, str(HERE / "run_one.py"), backend, workload], capture_output=True,
                              text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"backend": backend, "workload": workload, "error": f"timed out after {timeout} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"backend": backend, "workload": workload, "error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(lines[-1])


def measure_workload(workload: str, backends: list[str], timeout: int, processes: int = 1) -> list[dict]:
    """Each backend's row for `workload`, from `processes` fresh processes per backend run in rounds (every
    backend once, then every backend again), so a drift of the host's speed over minutes (run 12, run 13)
    falls on all backends alike instead of on whichever ran its processes during it. Latency, device and
    host ms are the median over a backend's processes of each process's median. kiln runs at least two on
    one fresh cache folder: the first compile is cold (NVRTC and the ATen trace run), the later ones warm
    (kernels and the captured graph read back: kiln.capture_cache keeps it under
    $KILN_CACHE_DIR/captures); only the first `processes` count for latency. A backend whose process
    failed runs no more and its row is that error."""
    rounds = max(processes, 2) if "kiln" in backends else processes
    samples: dict[str, list[dict]] = {b: [] for b in backends}
    with contextlib.ExitStack() as stack:
        envs = {b: dict(os.environ, KILN_CACHE_DIR=stack.enter_context(
            tempfile.TemporaryDirectory(prefix="kiln-bench-cache-"))) for b in backends}
        for i in range(rounds):
            for b in backends:
                if (i < processes or b == "kiln") and not any("error" in r for r in samples[b]):
                    samples[b].append(measure_once(b, workload, timeout, envs[b]))
    return [_row(b, samples[b], processes) for b in backends]


def _row(backend: str, samples: list[dict], processes: int) -> dict:
    failed = [r for r in samples if "error" in r]
    if failed:
        return failed[0]
    result = dict(samples[0])
    if backend == "kiln":
        result["compile_s_warm"] = statistics.median(r["compile_s"] for r in samples[1:])
    timed = samples[:processes]
    for key in ("median_ms", "device_ms", "host_ms"):
        if all(key in r for r in timed):
            result[key] = statistics.median(r[key] for r in timed)
    # Every process's own figures, the warm-only ones included: how far the host moved them.
    result["processes"] = [{k: r[k] for k in ("median_ms", "device_ms", "host_ms", "compile_s", "host") if k in r}
                           for r in samples]
    return result


def compile_text(r: dict) -> str:
    if "compile_s_warm" in r:
        return f"{r['compile_s']:.2f} cold, {r['compile_s_warm']:.2f} warm"
    return f"{r['compile_s']:.2f}"


def field_text(r: dict, key: str) -> str:
    return f"{r[key]:.3f}" if key in r else ""  # rows of earlier runs may lack the newer fields


def table(results: list[dict]) -> str:
    rows = ["| workload | backend | median ms | device ms | host ms per call | compile s | peak MiB over eager "
            "| after MiB over eager | max abs diff |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            rows.append(f"| {r['workload']} | {r['backend']} | error: {r['error'][:80]} | | | | | | |")
        else:
            rows.append(
                f"| {r['workload']} | {r['backend']} | {r['median_ms']:.3f} | {field_text(r, 'device_ms')} | "
                f"{field_text(r, 'host_ms')} | {compile_text(r)} | "
                f"{r['peak_over_eager_mib']:.0f} | {r['after_over_eager_mib']:.0f} | {r['max_abs_diff']:.3g} |"
            )
    return "\n".join(rows)


def main() -> None:
    from workloads import WORKLOADS

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--out", default=str(HERE.parent / "docs" / "benchmarks.md"))
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--processes", type=int, default=1,
                        help="fresh processes per backend and workload, in rounds over the backends; the table shows "
                        "the median over them")
    parser.add_argument("--json", help="also append each result to this file as one JSON line")
    parser.add_argument("--merge", action="append", default=[],
                        help="JSON-lines file of earlier results (same machine) to put in the table too")
    args = parser.parse_args()
    if args.processes < 1:
        parser.error(f"--processes must be at least 1, got {args.processes}")
    results = [json.loads(line) for path in args.merge for line in pathlib.Path(path).read_text().splitlines() if line]
    for workload in args.workloads.split(","):
        for r in measure_workload(workload, args.backends.split(","), args.timeout, args.processes):
            print(json.dumps(r), flush=True)
            results.append(r)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(r) + "\n")
    order = {(w, b): i for i, (w, b) in enumerate((w, b) for w in WORKLOADS for b in BACKENDS)}
    results.sort(key=lambda r: order.get((r["workload"], r["backend"]), len(order)))
    text = f"# Benchmarks\n\nMeasured {environment()} by `python bench/run.py`.\n\n{table(results)}\n"
    pathlib.Path(args.out).write_text(text)
    print(table(results))


if __name__ == "__main__":
    main()
