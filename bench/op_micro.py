"""One op's kernels, kiln's against torch eager's, by device time per launch
(torch.profiler), on the shapes the transformer rows of bench/run.py give them:

    python bench/op_micro.py attention [--batch 1] [--heads 12] [--seq 128] [--dim 64] [--causal 1]
    python bench/op_micro.py layer_norm [--batch 1] [--seq 128] [--width 768]
                             [--dtype fp16|bf16] [--iters 50]

attention: q, k and v are head views of one [B, L, 3 * H * D] projection, as GPT-2 lays them out
(torch's side is SDPA, cuDNN's kernel on the H200). layer_norm: [B, L, width] with weight and bias.
A diagnostic for the GPU machine (run it under ncu to read a kernel's counters:
`gpu_step.sh ncu REGEX bench/op_micro.py ...`); not a test."""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

import kiln  # noqa: F401  (registers the "kiln" backend)
from kernel_profile import device_times


def attention(heads: int, causal: bool):
    def f(qkv):
        b, n, width = qkv.shape
        d = width // (3 * heads)
        q, k, v = (t.view(b, n, heads, d).transpose(1, 2) for t in qkv.split(heads * d, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return y.transpose(1, 2).reshape(b, n, heads * d)
    return f


def kernel_times(fn, x, iters: int) -> dict[str, tuple[float, int]]:
    """Mean device microseconds per launch and launches per call, by kernel name."""
    with torch.inference_mode():
        for _ in range(5):
            fn(x)
        torch.cuda.synchronize()
    total, count = device_times(fn, (x,), iters)
    return {name: (total[name] / count[name], count[name] // iters) for name in total}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("op", choices=["attention", "layer_norm"])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--causal", type=int, default=1)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    p.add_argument("--iters", type=int, default=50)
    a = p.parse_args()
    dtype = torch.float16 if a.dtype == "fp16" else torch.bfloat16
    torch.manual_seed(0)
    if a.op == "attention":
        x = torch.randn(a.batch, a.seq, 3 * a.heads * a.dim, device="cuda", dtype=dtype)
        eager = attention(a.heads, bool(a.causal))
        shape = f"B={a.batch} H={a.heads} L=S={a.seq} D={a.dim} causal={a.causal}"
    else:
        x = torch.randn(a.batch, a.seq, a.width, device="cuda", dtype=dtype)
        norm = torch.nn.LayerNorm(a.width, device="cuda", dtype=dtype)
        with torch.no_grad():
            norm.weight.normal_()
            norm.bias.normal_()
        eager = norm
        shape = f"[{a.batch}, {a.seq}, {a.width}]"
    compiled = torch.compile(eager, backend="kiln")
    with torch.inference_mode():
        diff = (compiled(x).float() - eager(x).float()).abs().max().item()
    print(f"{a.op} {shape} {a.dtype}; max abs diff {diff:.3g}")
    for label, fn in (("torch", eager), ("kiln", compiled)):
        for name, (us, per_call) in sorted(kernel_times(fn, x, a.iters).items(), key=lambda kv: -kv[1][0]):
            print(f"  {label:6s} {us:8.2f} us x{per_call}  {name[:100]}")


if __name__ == "__main__":
    main()
