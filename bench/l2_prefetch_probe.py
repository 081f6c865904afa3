"""Can the Linear stack run faster with torch's own kernels, by prefetching each layer's weight into L2 before its
product starts? (issue 4: "the Linear stack at or under 0.85 ms" with "a max abs diff of exactly 0").

bench/gemm_order_probe.py found that on the H200 no kernel of kiln's own can keep cuBLAS's summation order, so
the diff of 0 needs cuBLAS's kernels. What is left is the time between them: torch's stack moves its weights at
3.26 TB/s (0.988 ms, run 22) against about 4.3 TB/s that a stream of reads reaches, so a tenth of each 41 us
layer has DRAM idle (the product's tail, the split-K reduction, the next launch, its pipeline filling). A few
threads issuing bulk L2 prefetches (l2_prefetch_probe.cu) of the next weight's first bytes can keep DRAM busy
then, and the next product starts on L2 hits. The answer is unchanged by construction (the same kernels run on
the same bytes), and the probe checks it bit for bit.

Variants, each the `--layers` stack captured as one CUDA graph, median by CUDA events, against the same stack
without prefetches, measured before and after the variants:
- where: "serial" (a prefetch kernel on the stream just before each product), "one ahead" (on a side stream,
  started with product i-1, for product i's weight), "with its own" (a side stream, started with product i for
  its own weight: a control, it can only help the product's first reads);
- what: the first `fraction` of each of `parts` equal pieces of every weight row (parts 1: the rows' starts, as a
  product without split-K reads them; parts 4: four contiguous K ranges, as a split-K product may);
- eviction: normal, or evict-last (so that the product streaming the current weight does not evict them first).

    python bench/l2_prefetch_probe.py [--batch 8] [--width 8192] [--layers 24]

Needs an sm_90 GPU and nvcc (the kernel is built into a temporary folder). About 30 s on an H200."""

from __future__ import annotations

import argparse
import tempfile

import torch
import torch.nn.functional as F

from driver_kernels import Kernels, default_init, graphed, linear_stack, median_ms

PLACES = ("serial", "one ahead", "with its own")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--width", type=int, default=8192)
    parser.add_argument("--layers", type=int, default=24)
    args = parser.parse_args()
    M, N, L = args.batch, args.width, args.layers
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        raise SystemExit("l2_prefetch_probe needs an sm_90 GPU (its kernel is built for sm_90a)")
    if M < 1 or N % 256 or N < 1024 or L < 2:
        raise SystemExit(f"--batch must be positive, --width a multiple of 256 (at least 1024) and --layers at least 2, "
                         f"got {M}, {N} and {L}")
    torch.manual_seed(0)
    dev = "cuda"
    with tempfile.TemporaryDirectory(prefix="kiln-l2-probe-") as folder:
        kernels = Kernels(folder, "l2_prefetch_probe.cu")
        prefetch = kernels.function("prefetch_rows")
        props = torch.cuda.get_device_properties(0)
        print(f"{props.name}, {props.multi_processor_count} SMs, L2 {props.L2_cache_size >> 20} MiB, torch "
              f"{torch.__version__}, x [{M}, {N}] through {L} x W [{N}, {N}] fp16")
        layers = [default_init(N, N) for _ in range(L)]
        x = torch.randn(M, N, device=dev).half()
        row_bytes = N * 2

        def plain():
            return linear_stack(x, layers)

        want = plain()
        side = torch.cuda.Stream()
        last = [None]

        def with_prefetch(place: str, parts: int, nbytes: int, evict_last: int):
            def issue(w):
                kernels.launch(prefetch, (8, 1), 256, 0, [w, row_bytes, N, parts, nbytes, evict_last])

            def issue_on_side(w):
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    issue(w)

            def run():
                h = x
                for i, w in enumerate(layers):
                    if place == "serial":
                        issue(w)
                    elif place == "with its own":
                        issue_on_side(w)
                    else:  # one ahead; the first weight has no product before it to hide behind
                        if i == 0:
                            issue(w)
                        if i + 1 < L:
                            issue_on_side(layers[i + 1])
                    h = F.linear(h, w)
                if place != "serial":  # (joining a side stream that the capture never forked is an error)
                    torch.cuda.current_stream().wait_stream(side)
                last[0] = h  # after capture: the graph's own output, which each replay rewrites
                return h

            return run

        results = {}
        base_before = median_ms(graphed(plain))
        print(f"no prefetch: {base_before:.4f} ms ({L * N * N * 2 / base_before / 1e9:.2f} TB/s)")
        print("| where | parts | first bytes of each part | MiB a layer | L2 hint | ms | x no prefetch | outputs differing |")
        print("|---|---|---|---|---|---|---|---|")
        for place in PLACES:
            for parts in (1, 4):
                for fraction in (1 / 16, 1 / 8, 1 / 4):
                    nbytes = max(16, int(row_bytes // parts * fraction) // 16 * 16)
                    for evict_last in (0, 1):
                        run = with_prefetch(place, parts, nbytes, evict_last)
                        replay = graphed(run)
                        ms = median_ms(replay)
                        differ = int((last[0] != want).sum())  # the last replay's answer
                        results[(place, parts, fraction, evict_last)] = ms
                        print(f"| {place} | {parts} | {nbytes} B ({fraction:g}) | {N * parts * nbytes / 2**20:.0f} | "
                              f"{'evict-last' if evict_last else 'normal'} | {ms:.4f} | {ms / base_before:.3f} | {differ} |")
        base_after = median_ms(graphed(plain))
        best = min(results, key=results.get)
        print(f"no prefetch again: {base_after:.4f} ms; the fastest variant: {best} at {results[best]:.4f} ms "
              f"({results[best] / min(base_before, base_after):.3f}x the faster no-prefetch run)")


if __name__ == "__main__":
    main()
