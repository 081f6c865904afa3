"""How short a warm first call could be if Dynamo did not trace again: each benchmark model compiled in
a fresh process with torch's experimental caching precompile on (TORCH_CACHING_PRECOMPILE=1, a Dynamo
cache on disk keyed by the model's source), by a pass-through backend that records the graph as its
artifact (torch's EagerCacheArtifact) and returns it unchanged, so no backend work is in the figures.
`--backend kiln` compiles with kiln instead, whose artifact (kiln.precompile) is its captured graph: the
figures kiln reaches through the precompile (its kernel and capture caches in the same folder).

"cold": a process with an empty cache folder, which then saves its entries
(torch.compiler.save_cache_artifacts). "warm": the next process on that folder, whose first call loads
Dynamo's bytecode, guards and the recorded graph instead of tracing. With the pass-through backend,
the warm column is the floor any backend's artifact could reach. Each column is the median over the repeats;
"run" is one eager call of the model, the part of any first call that is the model's own work.

    python bench/precompile_floor.py [--models resnet50,vit_b_16,bert,gpt2] [--device cpu] [--repeats 3]
                                     [--backend passthrough|kiln]

fp32 on the CPU and fp16 on CUDA, batch 1 (sequence 128 for the text models)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from compile_time import _build, _dtype, _dynamo_times


def one(name: str, device: str, save: bool, backend_name: str) -> dict:
    """The first call of `name` through the caching precompile, Dynamo's tracing and guard seconds in it,
    one eager call, and the first call's max abs diff against eager."""
    import torch
    import torch.utils._pytree as pytree
    from torch._dynamo.precompile_context import EagerCacheArtifact, PrecompileContext

    if not torch._dynamo.config.caching_precompile:
        raise RuntimeError("run with TORCH_CACHING_PRECOMPILE=1 (the parent process sets it)")

    def passthrough(gm, example_inputs):
        PrecompileContext.record_artifact(EagerCacheArtifact(key=gm._backend_id, content=gm))
        return gm.forward

    backend = passthrough if backend_name == "passthrough" else "kiln"

    def timed(call):  # seconds of call(), the device's work included
        start = time.perf_counter()
        result = call()
        if device == "cuda":
            torch.cuda.synchronize()
        return result, time.perf_counter() - start

    model, inputs = _build(name, device)
    with torch.no_grad():
        # Dynamo loaded by a tiny model through the same backend.
        tiny = torch.nn.Linear(8, 8).to(device, _dtype(device))
        torch.compile(tiny, backend=backend)(torch.randn(2, 8, device=device, dtype=_dtype(device)))
        before = _dynamo_times()
        # torch.compile itself is timed: with the cache on, wrapping the model is where its entry is loaded.
        got, first = timed(lambda: torch.compile(model, backend=backend)(*inputs))
        after = _dynamo_times()
        want, run = timed(lambda: model(*inputs))
    diff = max((float((g - w).abs().max()) for g, w in zip(pytree.tree_leaves(got), pytree.tree_leaves(want))
                if isinstance(g, torch.Tensor)), default=0.0)
    if save:
        torch.compiler.save_cache_artifacts()

    def spent(key):
        return after.get(key, 0.0) - before.get(key, 0.0)

    result = {"first call": first, "dynamo": spent("bytecode_tracing"), "guards": spent("build_guards"), "run": run,
              "diff": diff}
    if backend_name == "kiln":  # kiln's own stages of the first call, and what torch took around them
        from run_one import kiln_stage_seconds

        result["stages"] = kiln_stage_seconds(first)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet50,vit_b_16,bert,gpt2")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backend", choices=["passthrough", "kiln"], default="passthrough")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process: one model, JSON on stdout
    parser.add_argument("--save", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.device, args.save, args.backend)), flush=True)
        return
    models = args.models.split(",")
    runs: dict = {(m, c): [] for m in models for c in ("cold", "warm")}
    errors: dict = {}
    for _ in range(args.repeats):
        for m in models:
            with tempfile.TemporaryDirectory(prefix="kiln-precompile-") as cache:
                env = dict(os.environ, TORCH_CACHING_PRECOMPILE="1", TORCHINDUCTOR_CACHE_DIR=cache,
                           KILN_CACHE_DIR=os.path.join(cache, "kiln"))
                for column, extra in (("cold", ["--save"]), ("warm", [])):
                    child = [sys.executable, __file__, "--one", m, "--device", args.device, "--backend", args.backend,
                             *extra]
                    out = subprocess.run(child, capture_output=True, text=True, cwd=os.path.dirname(__file__) or ".",
                                         env=env)
                    if out.returncode:  # torch's precompile is experimental: a model it fails on is a finding
                        errors.setdefault((m, column), out.stderr.strip().splitlines()[-1])
                        break
                    runs[(m, column)].append(json.loads(out.stdout.strip().splitlines()[-1]))
    import torch

    print(f"torch {torch.__version__}, {args.device}, {os.cpu_count()} CPUs, {args.backend} backend, median of "
          f"{args.repeats} process pairs")
    print("| model | first call cold s | first call warm s | Dynamo's tracing s (cold / warm) | guards s (cold / warm) "
          "| run s | max abs diff (warm) |")
    print("|---|---|---|---|---|---|---|")
    for m in models:
        failed = [f"{c}: {errors[(m, c)]}" for c in ("cold", "warm") if (m, c) in errors]
        if failed:
            print(f"| {m} | failed ({'; '.join(failed)}) |")
            continue

        def med(column, part):
            return statistics.median(r[part] for r in runs[(m, column)])

        print(f"| {m} | {med('cold', 'first call'):.2f} | {med('warm', 'first call'):.2f} | "
              f"{med('cold', 'dynamo'):.2f} / {med('warm', 'dynamo'):.2f} | "
              f"{med('cold', 'guards'):.2f} / {med('warm', 'guards'):.2f} | {med('warm', 'run'):.2f} | "
              f"{max(r['diff'] for r in runs[(m, 'warm')]):.1e} |")
    for m in models:
        for column in ("cold", "warm"):
            stages = [r["stages"] for r in runs[(m, column)] if "stages" in r]
            if stages:
                names = sorted({n for s in stages for n in s}, key=lambda n: -statistics.median(s.get(n, 0.0) for s in stages))
                print(f"{m} {column}, kiln's stages (s, median): " + ", ".join(
                    f"{n} {statistics.median(s.get(n, 0.0) for s in stages):.3f}" for n in names))


if __name__ == "__main__":
    main()
