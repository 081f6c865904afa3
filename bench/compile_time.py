"""Where the first call's time goes (issue 4's compile target): each benchmark model compiled by kiln
in a fresh process, after a tiny model has loaded Dynamo, aot_autograd and kiln, its first call split
with Dynamo's own timers (torch._dynamo.utils.compile_times) and kiln's stages (kiln.memory_report):

    dynamo     Dynamo's bytecode tracing of the model's Python
    capture    Dynamo's graph to core ATen (kiln.aten_capture's one trace, or aot_autograd)
    kiln       kiln's compile: import, plan, lower (NVRTC on CUDA)
    guards     Dynamo's guards
    first run  the compiled model's first run: kiln's folds, then the run itself
    rest       the remainder of the first call (Dynamo's graph and bytecode building; on CUDA also
               the wait for the device after the first run, whose stage ends when its launches return)

    python bench/compile_time.py [--models resnet50,vit_b_16,bert,gpt2] [--device cpu] [--repeats 3]
                                 [--cache cold|warm] [--compare-capture] [--kernels N]

--cache: each process gets an empty capture cache (kiln.capture_cache) of its own, so kiln traces the
ATen graph ("cold", the default), or one that an unmeasured process compiling the same model filled
("warm": the capture is read back). The CUDA kernel cache is left as it is ($KILN_CACHE_DIR).

--kernels N adds, per model, the N kernel kinds whose lowering and first launch took the most host
time (Executable.step_timings: a cuDNN plan, a cuBLASLt heuristic, a generated kernel's wait for its
CUBIN and its load), and the folds' compile, run and drop seconds.

--compare-capture times the capture alone, three ways, inside the same Dynamo backend call:
kiln.aten_capture's one trace as it is ("one trace": plain where kiln.in_place can make its in-place
ops functional), its functionalized trace forced ("functionalized"), and aot_autograd's two traces
(with a compiler that returns the graph), the order rotated from one process to the next; a way back
to either if a torch release makes it the faster one.

fp32 on the CPU and fp16 on CUDA, batch 1 (sequence 128 for the text models). Prints the median over
the repeats of each part, models interleaved across repeats so that a host's drift spreads over all."""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PARTS = ("first call", "dynamo", "capture", "kiln", "guards", "first run", "rest")


def _dynamo_times() -> dict:
    from torch._dynamo.utils import compile_times

    names, values = compile_times(repr="csv")  # per name, one figure per compile so far: "0.27, 2.81"
    return {name: sum(float(v) for v in value.split(",")) for name, value in zip(names, values)}


def one(name: str, device: str) -> dict:
    """The first call of `name` compiled by kiln, split into PARTS (seconds), and how its graphs were
    captured."""
    import torch

    from kiln.dynamo_backend import kiln_backend
    from kiln.report import Report
    from kiln.memory_probe import warm_up
    from run_one import kiln_stage_seconds

    model, inputs = _build(name, device)
    reports = []
    with torch.no_grad():
        warm_up(torch.device(device), _dtype(device))
        before = _dynamo_times()
        start = time.perf_counter()
        torch.compile(model, backend=functools.partial(kiln_backend, reports=reports))(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
        total = time.perf_counter() - start
    after = _dynamo_times()

    def spent(key):
        return after.get(key, 0.0) - before.get(key, 0.0)

    stages = kiln_stage_seconds(total)
    kiln_s = sum(stages.get(stage, 0.0) for stage in ("import", "plan", "lower"))  # inside the backend call
    backend = spent("OutputGraph.call_user_compiler")
    parts = {"first call": total, "dynamo": spent("bytecode_tracing"), "capture": backend - kiln_s, "kiln": kiln_s,
             "guards": spent("build_guards"), "first run": sum(stages.get(s, 0.0) for s in ("fold", "first run"))}
    parts["rest"] = total - sum(parts[p] for p in PARTS[1:6])
    parts["captured by"] = ", ".join(sorted({report.capture for report in reports}))
    parts["kernels"] = Report(reports).kernel_timings()
    folds = [r.folds for report in reports for r in report.region_modules if r.folds is not None]
    parts["fold compile"] = sum(f.compile_s for f in folds)
    parts["fold run"] = sum(f.run_s for f in folds)
    parts["fold drop"] = sum(f.drop_s for f in folds)
    return parts


def print_kernels(name: str, runs: list[dict], top: int) -> None:
    """The kernel kinds of `name` that took the most host time lowering and first launching, median over the
    processes, and the folds' compile, run and drop (free and unload) seconds."""
    kinds = {kind for r in runs for kind in r["kernels"]}

    def median(kind, column):
        return statistics.median(r["kernels"].get(kind, [0, 0.0, 0.0])[column] for r in runs)

    rows = sorted(kinds, key=lambda k: -(median(k, 1) + median(k, 2)))[:top]
    fold_compile = statistics.median(r["fold compile"] for r in runs)
    fold_run = statistics.median(r["fold run"] for r in runs)
    fold_drop = statistics.median(r["fold drop"] for r in runs)
    print(f"\n{name}: folds compile {fold_compile:.3f} s, run {fold_run:.3f} s, drop {fold_drop:.3f} s (host)")
    print("| kernel | count | lower ms | first launch ms |")
    print("|---|---|---|---|")
    for kind in rows:
        print(f"| {kind} | {median(kind, 0):.0f} | {median(kind, 1):.1f} | {median(kind, 2):.1f} |")


def compare_capture(name: str, device: str, rotation: int) -> dict:
    """Seconds of kiln.aten_capture's capture (as it is, and functionalized) and of aot_autograd's, all of
    Dynamo's graph of `name`, in an order rotated by `rotation`."""
    import torch
    from torch._dynamo.backends.common import aot_autograd

    from kiln.aten_capture import capture_inference_graph
    from kiln.decompositions import decomposition_table
    from kiln.memory_probe import warm_up

    model, inputs = _build(name, device)
    table = decomposition_table()
    seconds = {}

    def kiln_trace(label, gm, example_inputs, plain):
        start = time.perf_counter()
        graph, why = capture_inference_graph(gm, example_inputs, table, plain=plain)
        if graph is None:
            raise RuntimeError(f"{name}: kiln.aten_capture declined the graph: {why}")
        seconds[label] = time.perf_counter() - start

    def one_trace(gm, example_inputs):
        kiln_trace("one trace", gm, example_inputs, plain=True)

    def functionalized(gm, example_inputs):
        kiln_trace("functionalized", gm, example_inputs, plain=False)

    def two_traces(gm, example_inputs):
        start = time.perf_counter()
        aot_autograd(fw_compiler=lambda graph, _: graph, decompositions=table)(gm, example_inputs)
        seconds["aot_autograd"] = time.perf_counter() - start

    ways = [one_trace, functionalized, two_traces]

    def backend(gm, example_inputs):
        for k in range(len(ways)):
            ways[(k + rotation) % len(ways)](gm, example_inputs)
        return gm.forward

    with torch.no_grad():
        warm_up(torch.device(device), _dtype(device))
        torch.compile(model, backend=backend)(*inputs)
    return seconds


def _dtype(device: str):
    import torch

    return torch.float16 if device == "cuda" else torch.float32


def _build(name: str, device: str):
    import torch

    from workloads import hf_model, torchvision_model

    dtype = _dtype(device)
    torch.manual_seed(0)
    if name in ("bert", "gpt2"):
        return hf_model(name, 1, device=device, dtype=dtype)
    return torchvision_model(name, 1, device=device, dtype=dtype)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet50,vit_b_16,bert,gpt2")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache", choices=("cold", "warm"), default="cold")
    parser.add_argument("--compare-capture", action="store_true")
    parser.add_argument("--kernels", type=int, default=0, metavar="N",
                        help="also list each model's N kernel kinds that took the most host time to lower and "
                             "first launch, and its folds' compile, run and drop time")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process: one model, JSON on stdout
    parser.add_argument("--rotation", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        result = compare_capture(args.one, args.device, args.rotation) if args.compare_capture else \
            one(args.one, args.device)
        print(json.dumps(result), flush=True)
        return
    models = args.models.split(",")
    runs: dict = {m: [] for m in models}
    for repeat in range(args.repeats):
        for m in models:
            child = [sys.executable, __file__, "--one", m, "--device", args.device]
            if args.compare_capture:
                child += ["--compare-capture", "--rotation", str(repeat)]
            with tempfile.TemporaryDirectory(prefix="kiln-captures-") as captures:
                env = dict(os.environ, KILN_CAPTURE_CACHE="1", KILN_CAPTURE_CACHE_DIR=captures)
                for _ in range(2 if args.cache == "warm" and not args.compare_capture else 1):
                    out = subprocess.run(child, capture_output=True, text=True, cwd=os.path.dirname(__file__) or ".",
                                         env=env)
            if out.returncode:
                sys.exit(f"{m}: the child process failed:\n{out.stderr[-3000:]}")
            runs[m].append(json.loads(out.stdout.strip().splitlines()[-1]))
    import torch

    parts = ("one trace", "functionalized", "aot_autograd") if args.compare_capture else PARTS
    cache = "" if args.compare_capture else f", capture cache {args.cache}"
    print(f"torch {torch.__version__}, {args.device}, {os.cpu_count()} CPUs, median of {args.repeats} fresh processes"
          f"{cache}")
    captures = "" if args.compare_capture else " captured by |"
    print("| model | " + " | ".join(f"{p} s" for p in parts) + " |" + captures)
    print("|---|" + "---|" * (len(parts) + bool(captures)))
    for m in models:
        how = "" if args.compare_capture else f" {', '.join(sorted({r['captured by'] for r in runs[m]}))} |"
        print(f"| {m} | " + " | ".join(f"{statistics.median(r[p] for r in runs[m]):.2f}" for p in parts) + " |" + how)
    if args.kernels and not args.compare_capture:
        for m in models:
            print_kernels(m, runs[m], args.kernels)


if __name__ == "__main__":
    main()
