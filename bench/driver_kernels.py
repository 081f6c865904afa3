"""A .cu file of bench/ built by nvcc for sm_90a and loaded through the CUDA driver API (ctypes) into torch's
context, and the helpers the GPU probes (bench/gemm_order_probe.py, bench/l2_prefetch_probe.py) share: the
Linear stack and CUDA-event timers.
No kiln build is needed: the probes run on a machine with torch, nvcc and an sm_90 GPU."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


class Kernels:
    """bench/`source` built by nvcc into `folder` and loaded into torch's context."""

    def __init__(self, folder: str, source: str) -> None:
        torch.zeros(1, device="cuda")  # torch's context, current on this thread, for the module
        nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
        cubin = os.path.join(folder, os.path.splitext(source)[0] + ".cubin")
        subprocess.run([nvcc, "-cubin", "-gencode=arch=compute_90a,code=sm_90a", "-O3",
                        os.path.join(HERE, source), "-o", cubin], check=True)
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.cu.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        self.module = ctypes.c_void_p()
        self._check(self.cu.cuModuleLoad(ctypes.byref(self.module), cubin.encode()), "cuModuleLoad")

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"{what} failed with CUDA driver error {rc}")

    def function(self, name: str, smem: int = 0) -> ctypes.c_void_p:
        f = ctypes.c_void_p()
        self._check(self.cu.cuModuleGetFunction(ctypes.byref(f), self.module, name.encode()), name)
        if smem > 48 * 1024:  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            self._check(self.cu.cuFuncSetAttribute(f, 8, smem), f"{name}: {smem} bytes of shared memory")
        return f

    def launch(self, f, grid: tuple[int, int], block: int, smem: int, args: list) -> None:
        """Launches `f` on torch's current stream; tensors pass as pointers, ints as 32-bit ints."""
        values = [ctypes.c_void_p(a.data_ptr()) if isinstance(a, torch.Tensor) else ctypes.c_int(a) for a in args]
        pointers = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self._check(self.cu.cuLaunchKernel(f, grid[0], grid[1], 1, block, 1, 1, smem, stream, pointers, None),
                    "cuLaunchKernel")


def median_ms(fn, reps: int = 30) -> float:
    """Median milliseconds of fn() between CUDA events, after a warm-up."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def graphed(fn):
    """fn captured once as a CUDA graph; returns its replay."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def default_init(n: int, k: int) -> torch.Tensor:
    """An fp16 [n, k] weight on the GPU as nn.Linear initializes it (uniform in +-1/sqrt(k))."""
    return ((torch.rand(n, k, device="cuda") * 2 - 1) * k ** -0.5).half()


def linear_stack(x: torch.Tensor, layers: list) -> torch.Tensor:
    """x through F.linear with each weight of `layers` in turn (torch's kernels)."""
    h = x
    for w in layers:
        h = F.linear(h, w)
    return h
