"""Where the host time of kiln's first call goes (issue 4's compile target), by cProfile: one benchmark
model compiled by kiln in a fresh process, after a tiny model has loaded Dynamo and kiln (as in
bench/compile_time.py), its first call profiled. Prints kiln's functions with the most cumulative time,
then all functions with the most time of their own (a C++ call into kiln or a CUDA library shows as the Python
call that makes it).

    python bench/first_call_profile.py MODEL [--device cuda] [--top 30]

MODEL is one of bench/compile_time.py's (resnet50, vit_b_16, bert, gpt2); fp16 on CUDA, fp32 on the CPU."""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

from compile_time import _build, _dtype


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    import torch

    from kiln.memory_probe import warm_up

    model, inputs = _build(args.model, args.device)
    profiler = cProfile.Profile()
    with torch.no_grad():
        warm_up(torch.device(args.device), _dtype(args.device))
        start = time.perf_counter()
        profiler.enable()
        torch.compile(model, backend="kiln")(*inputs)
        if args.device == "cuda":
            torch.cuda.synchronize()
        profiler.disable()
        total = time.perf_counter() - start
    print(f"{args.model} on {args.device}, torch {torch.__version__}: first call {total:.2f} s (profiled)")
    for title, order, only in (("kiln's functions by cumulative time", "cumulative", r"/kiln/[a-z_]+\.py:"),
                               ("all functions by their own time", "tottime", "")):
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(only, args.top)
        lines = [line for line in text.getvalue().splitlines() if line.strip()]
        start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls"))
        print(f"== {title}")
        print("\n".join(lines[start:]))


if __name__ == "__main__":
    main()
