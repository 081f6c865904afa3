"""python -m kiln: kiln's main job on a built-in default model.

Default: compile a torchvision ResNet-18 (random weights) with
torch.compile(backend="kiln") on this machine's CPU and print compile time,
latency against eager, the max abs difference against eager, and what fell
back to PyTorch. `--graph-api` instead builds a small MLP with kiln's own
graph API and prints its output next to a NumPy reference."""

from __future__ import annotations

import argparse
import statistics
import time


def graph_api_demo() -> None:
    import numpy as np

    import kiln

    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 16), dtype=np.float32)
    w1 = rng.standard_normal((32, 16), dtype=np.float32) * 0.25
    b1 = rng.standard_normal((32,), dtype=np.float32)
    w2 = rng.standard_normal((8, 32), dtype=np.float32) * 0.25

    g = kiln.Graph()
    xv = g.input("x", "f32", [4, 16])
    w1v = g.weight("fc1.weight", "f32", [32, 16])
    b1v = g.weight("fc1.bias", "f32", [32])
    w2v = g.weight("fc2.weight", "f32", [8, 32])
    h = g.op("matmul", [xv, g.op("permute", [w1v], {"dims": [1, 0]})[0]])[0]
    h = g.op("relu", [g.op("add", [h, b1v])[0]])[0]
    y = g.op("matmul", [h, g.op("permute", [w2v], {"dims": [1, 0]})[0]])[0]
    y = g.op("softmax", [y], {"dim": -1})[0]
    g.set_outputs([y])

    exe = kiln.compile_graph(g)
    for key, array in {"fc1.weight": w1, "fc1.bias": b1, "fc2.weight": w2}.items():
        exe.bind_weight(key, array)  # bound by pointer: no copy
    (out,) = exe(x)

    h_ref = np.maximum(x @ w1.T + b1, 0)
    logits = h_ref @ w2.T
    ref = np.exp(logits - logits.max(-1, keepdims=True))
    ref /= ref.sum(-1, keepdims=True)
    np.set_printoptions(precision=5, suppress=True)
    print("kiln graph:")
    print(g.text())
    print("kiln output:\n", out)
    print("numpy reference:\n", ref)
    print(f"max abs diff: {np.abs(out - ref).max():.3g}")


def _median_ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def model_demo(model_name: str, batch: int, size: int, runs: int) -> None:
    import torch
    import torchvision

    import kiln

    torch.manual_seed(0)
    model = getattr(torchvision.models, model_name)().eval()
    x = torch.randn(batch, 3, size, size)
    with torch.no_grad():
        eager = model(x)
        compiled = torch.compile(model, backend="kiln")
        t0 = time.perf_counter()
        out = compiled(x)
        compile_s = time.perf_counter() - t0
        for _ in range(2):
            model(x), compiled(x)
        eager_ms = _median_ms(lambda: model(x), runs)
        kiln_ms = _median_ms(lambda: compiled(x), runs)
    report = kiln.explain(model, x)
    print(f"model: torchvision {model_name}, random weights, input {tuple(x.shape)}, CPU, torch {torch.__version__}")
    print(f"compile (first call): {compile_s:.2f} s")
    print(f"latency (median of {runs}): eager {eager_ms:.2f} ms, kiln {kiln_ms:.2f} ms")
    print(f"max abs diff vs eager: {(out - eager).abs().max().item():.3g}")
    fallbacks = report.fallback_ops()
    print(f"lowered ATen nodes: {len(report.lowered)}; fell back: {len(report.fallbacks)}")
    for target, n in sorted(fallbacks.items()):
        reasons = {d.reason for d in report.fallbacks if d.target == target}
        print(f"  fallback {target} ×{n}: {'; '.join(sorted(reasons))}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m kiln", description=__doc__.split("\n\n")[1])
    parser.add_argument("--model", default="resnet18", help="torchvision model name (default resnet18)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--size", type=int, default=224, help="image height and width")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--graph-api", action="store_true", help="run the small graph-API demo instead")
    args = parser.parse_args()
    if args.graph_api:
        graph_api_demo()
    else:
        model_demo(args.model, args.batch, args.size, args.runs)


if __name__ == "__main__":
    main()
