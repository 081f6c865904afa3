"""Soak: many calls of one compiled model, and many compiles dropped again,
watching host memory, device memory, open file descriptors and threads.

    python bench/soak.py [--calls 100000] [--compiles 1000] [--device cpu|cuda] [--json out.json]

--compiles kiln graphs are built, compiled, run and dropped through kiln's own
API; a tenth as many models go through torch.compile(backend="kiln") and, for
comparison, backend="aot_eager" (what Dynamo keeps per compile is not kiln's).

After a warm-up, the process must not grow: the figures at the end equal the
figures after warm-up (threads and handles exactly; memory within a small
tolerance that allocator noise needs). Compiling and dropping graphs must
return host (and device) memory to the level before the first of them.
docs/reliability.md records the figures of real runs; tests/python/test_soak.py
runs a short version in CI. Not a timed test: nothing here measures speed."""

from __future__ import annotations

import argparse
import gc
import json
import os
import time


def process_figures(device: str) -> dict:
    """Resident host memory, open descriptors, threads and (on CUDA) torch's device memory, now."""
    import torch

    with open("/proc/self/statm") as f:
        rss_pages = int(f.read().split()[1])
    figures = {
        "rss_mib": rss_pages * os.sysconf("SC_PAGE_SIZE") / 2**20,
        "open_fds": len(os.listdir("/proc/self/fd")),
        "threads": len(os.listdir("/proc/self/task")),
    }
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        figures["cuda_allocated_mib"] = torch.cuda.memory_allocated() / 2**20
        figures["cuda_reserved_mib"] = torch.cuda.memory_reserved() / 2**20
    return figures


def small_model(device: str):
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.LayerNorm(128), torch.nn.Linear(128, 32)
    )
    return model.eval().to(device)


def soak_calls(calls: int, device: str, warmup: int = 200, checkpoints: int = 10) -> dict:
    """Calls one compiled model `calls` times; checks every output against eager; records figures."""
    import torch

    model = small_model(device)
    compiled = torch.compile(model, backend="kiln")
    x = torch.randn(8, 64, device=device)
    with torch.no_grad():
        want = model(x)
        for _ in range(warmup):  # the calls and the checks: torch loads the check's CUDA kernels lazily
            torch.allclose(compiled(x), want, atol=1e-5, rtol=1e-4)
        gc.collect()
        start = process_figures(device)
        trace, wrong, t0 = [], 0, time.perf_counter()
        every = max(1, calls // checkpoints)
        for i in range(1, calls + 1):
            got = compiled(x)
            if not torch.allclose(got, want, atol=1e-5, rtol=1e-4):
                wrong += 1
            if i % every == 0:
                gc.collect()
                trace.append({"calls": i, **process_figures(device)})
        seconds = time.perf_counter() - t0
    return {"calls": calls, "wrong_outputs": wrong, "seconds": seconds, "after_warmup": start, "trace": trace}


def kiln_graph(rng):
    """A small MLP built with kiln's graph API, and its weights and input as NumPy arrays."""
    import numpy as np

    import kiln

    g = kiln.Graph()
    x = g.input("x", "f32", [4, 64])
    w1, b1, w2 = g.weight("w1", "f32", [128, 64]), g.weight("b1", "f32", [128]), g.weight("w2", "f32", [32, 128])
    h = g.op("matmul", [x, g.op("permute", [w1], {"dims": [1, 0]})[0]])[0]
    h = g.op("gelu", [g.op("add", [h, b1])[0]])[0]
    g.set_outputs([g.op("matmul", [h, g.op("permute", [w2], {"dims": [1, 0]})[0]])[0]])
    arrays = {k: rng.standard_normal(s, dtype=np.float32) for k, s in (("w1", (128, 64)), ("b1", (128,)), ("w2", (32, 128)))}
    return g, arrays, rng.standard_normal((4, 64), dtype=np.float32)


def soak_graph_compiles(compiles: int, device: str) -> dict:
    """Builds, compiles, runs and drops `compiles` kiln graphs on `device` (kiln's own compile path, no
    Dynamo); on CUDA the weights, input and output are torch tensors there (DLPack)."""
    import numpy as np
    import torch

    import kiln

    rng = np.random.default_rng(0)

    def one_round() -> None:
        g, arrays, x = kiln_graph(rng)
        if device == "cpu":
            exe = kiln.compile_graph(g)
            for key, value in arrays.items():
                exe.bind_weight(key, value)
            exe(x)
            return
        exe = kiln.compile_graph(g, device)
        weights = {key: torch.from_numpy(value).to(device) for key, value in arrays.items()}
        for key, value in weights.items():
            exe.bind_weight(key, value)
        out = torch.empty(4, 32, device=device)
        exe.run([torch.from_numpy(x).to(device)], [out], torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()

    for _ in range(20):
        one_round()
    gc.collect()
    before = process_figures(device)
    for _ in range(compiles):
        one_round()
    gc.collect()
    return {"compiles": compiles, "device": device, "before": before, "after": process_figures(device)}


def soak_dynamo_compiles(compiles: int, device: str, backend: str) -> dict:
    """Compiles a fresh model `compiles` times through torch.compile with `backend`, dropping each one.
    Dynamo itself keeps a little per compile even after torch._dynamo.reset(); running the same loop
    with backend="aot_eager" (same aot_autograd front half, no kiln) measures that share."""
    import torch

    def one_round(i: int) -> float:
        torch._dynamo.reset()
        model = small_model(device)
        x = torch.randn(2 + i % 3, 64, device=device)
        with torch.no_grad():
            return (torch.compile(model, backend=backend)(x) - model(x)).abs().max().item()

    for i in range(25):  # loads the extension, Dynamo and the backend, and fills their caches
        one_round(i)
    torch._dynamo.reset()
    gc.collect()
    before = process_figures(device)
    worst = max(one_round(i) for i in range(compiles))
    torch._dynamo.reset()
    gc.collect()
    return {"compiles": compiles, "backend": backend, "max_abs_diff": worst, "before": before,
            "after": process_figures(device)}


def print_pair(title: str, first: dict, second: dict, labels=("before", "after")) -> None:
    print(title)
    for key in first:
        print(f"  {key:20s} {labels[0]} {first[key]:10.2f}   {labels[1]} {second[key]:10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--compiles", type=int, default=1000)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    calls = soak_calls(args.calls, args.device)
    graphs = soak_graph_compiles(args.compiles, args.device)
    dynamo = [soak_dynamo_compiles(args.compiles // 10, args.device, b) for b in ("kiln", "aot_eager")]
    print(f"{args.calls} calls on {args.device} in {calls['seconds']:.1f} s, wrong outputs: {calls['wrong_outputs']}")
    print_pair("per-process figures", calls["after_warmup"], calls["trace"][-1], ("after warm-up", "at the end"))
    print_pair(f"{args.compiles} kiln graphs compiled on {args.device}, run and dropped", graphs["before"], graphs["after"])
    for d in dynamo:
        print_pair(f"{d['compiles']} torch.compile(backend={d['backend']!r}) dropped (worst diff {d['max_abs_diff']:.2e})",
                   d["before"], d["after"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"calls": calls, "graph_compiles": graphs, "dynamo_compiles": dynamo}, f, indent=1)


if __name__ == "__main__":
    main()
