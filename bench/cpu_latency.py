"""kiln against eager PyTorch on the CPU, fp32, batch 1: torchvision resnet50 and vit_b_16 (224x224),
transformers BERT-base and GPT-2 small (sequence 128), random weights. Eager and kiln calls alternate
(one of each per pair), so a host whose speed drifts over seconds moves both sides of a pair alike;
the figure to read is the median of the per-pair ratio kiln / eager, with its quartiles.

    python bench/cpu_latency.py [--models resnet50,vit_b_16,bert,gpt2] [--pairs 20] [--threads N]

A benchmark, not a test (docs/benchmarks.md, "CPU"). kiln's pool and torch both use every core
unless --threads sets both (KILN_NUM_THREADS is read when kiln's pool starts)."""

from __future__ import annotations

import argparse
import os
import statistics
import time


def build(name: str):
    """(model, input) in fp32 on the CPU at batch 1, from the GPU benchmark's builders (bench/workloads.py)."""
    import torch

    from workloads import hf_model, torchvision_model

    torch.manual_seed(0)
    if name in ("bert", "gpt2"):
        model, inputs = hf_model(name, 1, device="cpu", dtype=torch.float32)
    else:
        model, inputs = torchvision_model(name, 1, device="cpu", dtype=torch.float32)
    return model, inputs[0]


def measure(name: str, pairs: int) -> str:
    import torch

    from run_one import first_tensor

    model, x = build(name)
    compiled = torch.compile(model, backend="kiln")
    with torch.inference_mode():
        start = time.perf_counter()
        got = compiled(x)
        compile_s = time.perf_counter() - start
        diff = (first_tensor(got) - first_tensor(model(x))).abs().max().item()
        for _ in range(2):
            model(x)
            compiled(x)
        eager_ms, kiln_ms = [], []
        for _ in range(pairs):
            for fn, times in ((model, eager_ms), (compiled, kiln_ms)):
                start = time.perf_counter()
                fn(x)
                times.append((time.perf_counter() - start) * 1e3)
    ratios = sorted(k / e for k, e in zip(kiln_ms, eager_ms))
    q = len(ratios) // 4
    med = statistics.median
    return (f"| {name} | {med(eager_ms):.1f} | {med(kiln_ms):.1f} | {med(ratios):.2f} "
            f"({ratios[q]:.2f}-{ratios[-1 - q]:.2f}) | {compile_s:.1f} | {diff:.2g} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet50,vit_b_16,bert,gpt2")
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        os.environ["KILN_NUM_THREADS"] = str(args.threads)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, threads {torch.get_num_threads()}", flush=True)
    print("| model | eager ms | kiln ms | kiln / eager per pair (quartiles) | kiln first call s | max abs diff |")
    print("|---|---|---|---|---|---|", flush=True)
    for name in args.models.split(","):
        print(measure(name, args.pairs), flush=True)


if __name__ == "__main__":
    main()
