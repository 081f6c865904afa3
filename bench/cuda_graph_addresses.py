"""How kiln's CUDA-graph replay copes with addresses that change between calls
(src/runtime/executable.h, "CUDA graphs"), and what NVRTC costs at compile.

On a GPU machine: python bench/cuda_graph_addresses.py
Prints per-call time (wall clock over many calls, so host overhead counts) for
a launch-bound model (a stack of Linear + GELU + residual blocks, fp16, batch 8):
  eager            cuda_graphs=False
  replay           graphs, the same input every call (outputs cycle through torch's cache)
  update           graphs, 8 inputs in turn: every call re-records and cudaGraphExecUpdate's
  static slots     replay plus the two device copies static input/output slots would add
and the compile time of the model with a cold and a warm kernel cache."""

from __future__ import annotations

import ctypes
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
        slot_in, slot_out = torch.empty_like(one[0]), torch.empty_like(one[0])

        def static_slots(x):
            slot_in.copy_(x)
            slot_out.copy_(compiled(slot_in))
            return slot_out

        rows = [
            ("torch eager", per_call_ms(model, one)),
            ("kiln eager (no graphs)", per_call_ms(eager, one)),
            ("kiln replay", per_call_ms(compiled, one)),
            ("kiln update (8 inputs in turn)", per_call_ms(compiled, eight)),
            ("kiln replay + static-slot copies", per_call_ms(static_slots, one)),
        ]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; {depth} blocks of Linear({width}) + GELU, fp16, batch 8")
    for name, ms in rows:
        print(f"  {name:34s} {ms:8.4f} ms/call")
    print(f"  compile, first call: cold kernel cache {times['cold cache']:.2f} s, warm {times['warm cache']:.2f} s")


if __name__ == "__main__":
    main()
