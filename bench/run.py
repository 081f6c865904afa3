"""The GPU benchmark (issue 4): one fresh process per backend and workload,
side by side, written as a table into docs/benchmarks.md.

    python bench/run.py [--backends eager,inductor,reduce-overhead,kiln] [--workloads a,b] [--out docs/benchmarks.md]

Not a test: run it on a GPU machine."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
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


def measure(backend: str, workload: str, timeout: int) -> dict:
    """kiln runs twice on a fresh kernel cache: the first compile is cold (NVRTC runs), the second warm."""
    if backend != "kiln":
        return measure_once(backend, workload, timeout)
    with tempfile.TemporaryDirectory(prefix="kiln-bench-cache-") as cache:
        env = dict(os.environ, KILN_CACHE_DIR=cache)
        cold = measure_once(backend, workload, timeout, env)
        warm = measure_once(backend, workload, timeout, env)
    if "error" not in cold and "error" not in warm:
        cold["compile_s_warm"] = warm["compile_s"]
        # The second process's timings too: a second sample of the per-process host time (run 8's bimodality).
        cold["warm_run"] = {k: warm[k] for k in ("median_ms", "device_ms", "host_ms", "host") if k in warm}
    return cold


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
    parser.add_argument("--json", help="also append each result to this file as one JSON line")
    parser.add_argument("--merge", action="append", default=[],
                        help="JSON-lines file of earlier results (same machine) to put in the table too")
    args = parser.parse_args()
    results = [json.loads(line) for path in args.merge for line in pathlib.Path(path).read_text().splitlines() if line]
    for workload in args.workloads.split(","):
        for backend in args.backends.split(","):
            r = measure(backend, workload, args.timeout)
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
