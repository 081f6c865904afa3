"""Where kiln's own part of a first call goes on one workload: cProfile over kiln's compile of each graph
(kiln.compile_fx.compile_fx_graph: import, plan, lower) and over each region's first call (its folds and
first run), Python functions by their own time, with the C++ calls (lowering, cuDNN plans, NVRTC,
module loads) counted in the Python function that made them. Run 13 had kiln's own stages at 0.66 s
per resnet50 row on the H200 against 0.04 s on the development CPU; this says which calls they are.

    python bench/compile_profile.py WORKLOAD [--top 25]

The capture cache is left as it is; KILN_CACHE_DIR decides whether NVRTC runs (a fresh folder: it does).
A diagnostic for the GPU machine, next to bench/run.py; not a test."""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import torch

from run_one import compile_for
from workloads import DIAGNOSTIC_WORKLOADS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", choices=sorted(DIAGNOSTIC_WORKLOADS))
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()

    import kiln.compile_fx as compile_fx
    from kiln.region import KilnRegion

    # A tiny model first, so Dynamo's, torch's and kiln's one-time imports and CUDA's start are not counted.
    warm = torch.nn.Linear(8, 8).cuda().half()
    with torch.inference_mode():
        compile_for("kiln", warm)(torch.randn(2, 8, device="cuda", dtype=torch.half))
    torch.cuda.synchronize()

    prof = cProfile.Profile()
    inner = compile_fx.compile_fx_graph
    first_forward = KilnRegion.forward

    def profiled_compile(*a, **k):
        prof.enable()
        try:
            return inner(*a, **k)
        finally:
            prof.disable()

    def profiled_forward(self, *a):
        if not self.first_call:
            return first_forward(self, *a)
        prof.enable()
        try:
            return first_forward(self, *a)
        finally:
            prof.disable()

    compile_fx.compile_fx_graph = profiled_compile
    KilnRegion.forward = profiled_forward

    torch.manual_seed(0)
    model, inputs = DIAGNOSTIC_WORKLOADS[args.workload]()
    with torch.inference_mode():
        fn = compile_for("kiln", model)
        start = time.perf_counter()
        fn(*inputs)
        torch.cuda.synchronize()
        first = time.perf_counter() - start
    print(f"== kiln on {args.workload}: first call {first:.3f} s, of which kiln's compile and first region "
          f"calls {pstats.Stats(prof).total_tt:.3f} s (under cProfile)")
    for order in ("tottime", "cumulative"):
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats(order).print_stats(args.top)
        print(f"-- by {order}:")
        print("\n".join(line for line in text.getvalue().splitlines() if line.strip()))


if __name__ == "__main__":
    main()
