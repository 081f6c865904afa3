"""How kiln's CUDA-graph replay copes with addresses that change between calls
(src/runtime/executable.h, "CUDA graphs"), and what NVRTC costs at compile.

On a GPU machine: python bench/cuda_graph_addresses.py
Prints per-call time (wall clock over many calls, so host overhead counts) for
a launch-bound model (a stack of Linear + GELU + residual blocks, fp16, batch 8):
  eager            cuda_graphs=False
  replay           graphs, the same input every call (outputs cycle through torch's cache)
  8 inputs in turn, more address sets than the 4 graphs kept, with each choice of
  cuda_graph_new_addresses:
    update         every call past the kept graphs re-records one and cudaGraphExecUpdate's it
    slots          every such call copies into static slots, replays, copies out
    choose         kiln's default: times the first update, then picks the cheaper
and the compile time of the model with a cold and a warm kernel cache."""

from __future__ import annotations

import ctypes
import functools
import os
import pathlib
import tempfile
import time

import torch

import kiln
from kiln.dynamo_backend import kiln_backend


class Block(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = torch.nn.Linear(width, width)

    def forward(self, x):
        return torch.nn.functional.gelu(self.fc(x)) * 0.5 + x


def per_call_ms(fn, inputs, calls=300):
    for i in range(20):
        fn(inputs[i % len(inputs)])
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(calls):
        fn(inputs[i % len(inputs)])
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e3


def main():
    torch.manual_seed(0)
    width, depth = 512, 12
    model = torch.nn.Sequential(*[Block(width) for _ in range(depth)]).cuda().half().eval()
    one = [torch.randn(8, width, device="cuda", dtype=torch.half)]
    eight = [torch.randn(8, width, device="cuda", dtype=torch.half) for _ in range(8)]
    lib = ctypes.CDLL(str(pathlib.Path(kiln.__file__).parent / "libkiln_cuda.so"))

    with tempfile.TemporaryDirectory() as cache, torch.inference_mode():
        os.environ["KILN_CACHE_DIR"] = cache
        times = {}
        for label in ("cold cache", "warm cache"):
            lib.kiln_cuda_kernel_cache_forget()
            torch._dynamo.reset()
            compiled = torch.compile(model, backend=kiln_backend)
            start = time.perf_counter()
            compiled(one[0])
            torch.cuda.synchronize()
            times[label] = time.perf_counter() - start
        eager = torch.compile(model, backend=kiln_backend, options={"cuda_graphs": False})
        rows = [
            ("torch eager", per_call_ms(model, one)),
            ("kiln eager (no graphs)", per_call_ms(eager, one)),
            ("kiln replay", per_call_ms(compiled, one)),
        ]
        for choice in ("update", "slots", "choose"):
            torch._dynamo.reset()
            reports = []
            backend = functools.partial(kiln_backend, reports=reports)
            turned = torch.compile(model, backend=backend, options={"cuda_graph_new_addresses": choice})
            ms = per_call_ms(turned, eight)
            stats = [r.exe.call_stats() for g in reports for r in g.region_modules]
            counts = {k: sum(st[k] for st in stats) for k in ("graph_updates", "slot_calls")}
            rows.append((f"kiln 8 inputs in turn, {choice}", ms, f"updates {counts['graph_updates']}, "
                         f"slot calls {counts['slot_calls']}"))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; {depth} blocks of Linear({width}) + GELU, fp16, batch 8")
    for name, ms, *counts in rows:
        print(f"  {name:34s} {ms:8.4f} ms/call  {' '.join(counts)}")
    print(f"  compile, first call: cold kernel cache {times['cold cache']:.2f} s, warm {times['warm cache']:.2f} s")


if __name__ == "__main__":
    main()
