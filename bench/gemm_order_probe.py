"""Which summation order torch's fp16 product uses for the Linear stack's shape, and how fast kernels that keep
that order run the stack (groundwork for issue 4's "Linear stack at or under 0.85 ms with a max abs diff of 0":
a faster kernel only keeps the diff at 0 if it sums in cuBLAS's order).

1. The kernels torch's F.linear runs for x [batch, width] and W [width, width] (torch.profiler), and
   cuBLASLt's heuristic picks for the same product as kiln asks for them (bench/cublaslt_choice.py): each one's
   split-K number, reduction scheme, tile, stages and cluster shape, and whether its result equals F.linear's.
2. Orders: for each split S of K (contiguous ranges, 64-to-512-wide tiles dealt round-robin, or contiguous runs
   of whole tiles when they do not divide evenly) the partial
   sums on tensor cores (mma.sync m16n8k16, each split's k16 steps in ascending order into one f32
   accumulator; the tiles' splits as in gemm_order_probe.cu's split_of_tile), then ways of adding the
   partials (f32 in order, f32 as a tree, fp16 in order, the partials rounded to fp16 then added in f32, and
   in groups of 2 or 4 first). Printed: the candidates whose result equals F.linear's bit for
   bit, on two kinds of data (the benchmark's default init, and N(0, 1) values).
3. Speed: the stack of `--layers` products (CUDA graphs, median by CUDA events) for torch and for two kernel
   kinds of gemm_order_probe.cu: a split-K kernel (S = 2, 4, 8) and one warp per 16 rows summing all of K in
   order (pipeline depths 8, 12, 16), each checked bit for bit against F.linear.

    python bench/gemm_order_probe.py [--batch 8] [--width 8192] [--layers 24]

Needs an sm_90 GPU and nvcc (the kernels are built into a temporary folder)."""

from __future__ import annotations

import argparse
import tempfile

import torch
import torch.nn.functional as F

import cublaslt_choice
from driver_kernels import Kernels, default_init, graphed, linear_stack, median_ms


def additions(partials: torch.Tensor) -> dict[str, torch.Tensor]:
    """The fp16 result of adding the splits' f32 partials [S, M, N] four ways."""
    in_order = partials[0].clone()
    for p in partials[1:]:
        in_order = in_order + p
    tree = list(partials)
    while len(tree) > 1:
        tree = [tree[i] + tree[i + 1] if i + 1 < len(tree) else tree[i] for i in range(0, len(tree), 2)]
    halves = partials.half()
    fp16_in_order = halves[0].clone()
    for h in halves[1:]:
        fp16_in_order = fp16_in_order + h
    rounded_first = halves[0].float()
    for h in halves[1:]:
        rounded_first = rounded_first + h.float()
    found = {"f32 in order": in_order.half(), "f32 tree": tree[0].half(), "fp16 in order": fp16_in_order,
             "fp16 partials, f32 in order": rounded_first.half()}
    S = partials.shape[0]
    for G in (2, 4):  # two levels (a cluster's splits first, say): groups of G, then the groups, each in order
        if S % G or S == G:
            continue
        for how, members in (("consecutive", lambda g: range(g * G, g * G + G)),
                             ("strided", lambda g: range(g, S, S // G))):
            groups = []
            for g in range(S // G):
                idx = list(members(g))
                total = partials[idx[0]].clone()
                for i in idx[1:]:
                    total = total + partials[i]
                groups.append(total)
            total = groups[0]
            for group in groups[1:]:
                total = total + group
            found[f"f32 in {how} groups of {G}, then in order"] = total.half()
    return found


def orders(kernels: Kernels, W: torch.Tensor, x: torch.Tensor) -> list[tuple[int, str, str, int]]:
    """(mismatches, split, layout, addition) for every candidate order, fewest mismatches first."""
    probe = kernels.function("probe_partials")
    (M, K), N = x.shape, W.shape[0]
    want = F.linear(x, W)
    found = []
    for S in (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 64, 128):
        layouts = [("contiguous", 0, 0)] if K % (S * 16) == 0 else []
        for tile in (64, 128, 256, 512):
            if K // tile < S:
                continue
            layouts.append((f"{tile}-wide tiles round-robin", 1, tile))
            if (K // tile) % S:  # uneven: the two ways of cutting contiguous runs of whole tiles
                layouts.append((f"runs of ceil(tiles/S) {tile}-wide tiles", 2, tile))
                layouts.append((f"even runs of {tile}-wide tiles, the first longer", 3, tile))
        for layout, mode, tile in layouts:
            partials = torch.empty(S, M, N, device=x.device, dtype=torch.float32)
            kernels.launch(probe, (N // 16, S), 32, 0, [W, x, partials, N, K, M, S, mode, tile])
            for addition, got in additions(partials).items():
                found.append((int((got != want).sum()), S, layout, addition))
    return sorted(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--width", type=int, default=8192)
    parser.add_argument("--layers", type=int, default=24)
    args = parser.parse_args()
    M, N = args.batch, args.width
    K = N
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        raise SystemExit("gemm_order_probe needs an sm_90 GPU (its kernels are built for sm_90a)")
    if not (1 <= M <= 8) or N % 128 or N < 1024:
        raise SystemExit(f"--batch must be 1-8 and --width a multiple of 128 (at least 1024), got {M} and {N}")
    dev = "cuda"
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="kiln-gemm-probe-") as folder:
        kernels = Kernels(folder, "gemm_order_probe.cu")
        print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, x [{M}, {K}] W [{N}, {K}] fp16, "
              f"allow_fp16_reduced_precision_reduction={torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction}")

        W, x = default_init(N, K), torch.randn(M, K, device=dev).half()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            F.linear(x, W)
            torch.cuda.synchronize()
        print("torch's kernels:", ", ".join(sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})))

        data = {"default init": (W, x), "N(0, 1)": (torch.randn(N, K, device=dev).half(), torch.randn(M, K, device=dev).half())}
        picks = {name: cublaslt_choice.choices(Wd, xd) for name, (Wd, xd) in data.items()}
        print("cuBLASLt's heuristic, as kiln asks it (first pick first):")
        for i, pick in enumerate(picks["default init"]):
            same = ", ".join(f"{name} {int((p[i]['result'] != F.linear(*reversed(data[name]))).sum())} differ"
                             for name, p in picks.items() if i < len(p))
            print(f"  {i}: {pick['config']}, workspace {pick['workspace']} B; against F.linear: {same}")
        for name, (Wd, xd) in data.items():
            found = orders(kernels, Wd, xd)
            exact = [f for f in found if f[0] == 0]
            shown = exact or found[:5]
            print(f"{name}: {len(exact)} of {len(found)} candidate orders equal F.linear bit for bit"
                  f"{'' if exact else '; the closest'}:")
            for mismatches, S, layout, addition in shown[:12]:
                print(f"  split {S}, {layout}, {addition}: {mismatches} of {M * N} outputs differ")

        layers = [default_init(N, K) for _ in range(args.layers)]
        outs = [torch.empty(M, N, device=dev, dtype=torch.half) for _ in layers]

        def eager():
            return linear_stack(x, layers)

        want = eager()
        eager_ms = median_ms(graphed(eager))
        print(f"torch, {args.layers} layers: {eager_ms:.4f} ms ({args.layers * N * K * 2 / eager_ms / 1e9:.2f} TB/s)")

        def report(label, f, grid, block, smem, extra):
            first = torch.empty(M, N, device=dev, dtype=torch.half)
            checks = []
            for name, (Wd, xd) in data.items():
                kernels.launch(f, grid, block, smem, [Wd, xd, *extra[0], first, N, K, M, *extra[1]])
                ref = F.linear(xd, Wd)
                checks.append(f"{name} {int((first != ref).sum())} differ")

            def run():
                h = x
                for w, o in zip(layers, outs):
                    kernels.launch(f, grid, block, smem, [w, h, *extra[0], o, N, K, M, *extra[1]])
                    h = o

            ms = median_ms(graphed(run))
            print(f"{label}: {ms:.4f} ms ({args.layers * N * K * 2 / ms / 1e9:.2f} TB/s, {ms / eager_ms:.3f}x torch); "
                  f"one product against F.linear: {', '.join(checks)}; the stack's output: "
                  f"{int((outs[-1] != want).sum())} differ")

        workspace = torch.empty(128 * M * N, device=dev, dtype=torch.float32)
        counters = torch.zeros(N // 128, device=dev, dtype=torch.int32)
        smem = 4 * (128 * 64 * 2 + 8 * 72 * 2)
        split_k = kernels.function("split_k_pipelined", smem)
        for S in (2, 4, 8):
            if K % (S * 64) == 0:
                report(f"split-K kernel, S={S}", split_k, (N // 128, S), 256, smem, ([workspace, counters], [S]))
        for depth in (8, 12, 16):
            smem = depth * (16 * 64 * 2 + 8 * 72 * 2)
            report(f"one warp per 16 rows, depth {depth}", kernels.function(f"rows16_d{depth}", smem), (N // 16, 1), 32,
                   smem, ([], []))
        print(f"torch again, {args.layers} layers: {median_ms(graphed(eager)):.4f} ms")


if __name__ == "__main__":
    main()
