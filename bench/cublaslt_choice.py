"""cuBLASLt's heuristic picks for y = x W^T in fp16 (f32 compute), as kiln's matmul lowering asks for them: each
algorithm's configuration (its split-K number and reduction scheme, tile, stages, cluster shape) and its result,
run once through cublasLtMatmul. Used by bench/gemm_order_probe.py, through ctypes on the libcublasLt that torch
has loaded; the enum values are cublasLt.h's (CUDA 13)."""

from __future__ import annotations

import ctypes

import torch

COMPUTE_32F, R_16F, R_32F = 68, 2, 0  # cublasComputeType_t, cudaDataType_t
DESC_TRANSA, PREF_MAX_WORKSPACE = 3, 1  # cublasLtMatmulDescAttributes_t, cublasLtMatmulPreferenceAttributes_t
OP_T = 1
WORKSPACE_BYTES = 32 << 20  # kiln's cuBLASLt workspace (CudaResources::kWorkspaceBytes)
CONFIG = (  # cublasLtMatmulAlgoConfigAttributes_t: (name, value, C type)
    ("id", 0, ctypes.c_int32), ("tile", 1, ctypes.c_uint32), ("split-K", 2, ctypes.c_int32),
    ("reduction scheme", 3, ctypes.c_uint32), ("CTA swizzling", 4, ctypes.c_uint32),
    ("custom option", 5, ctypes.c_uint32), ("stages", 6, ctypes.c_uint32), ("inner shape", 7, ctypes.c_uint16),
    ("cluster shape", 8, ctypes.c_uint16))
REDUCTION = {0: "none", 1: "in place", 2: "compute type", 4: "output type"}


class HeuristicResult(ctypes.Structure):
    _fields_ = [("algo", ctypes.c_uint64 * 8), ("workspace", ctypes.c_size_t), ("state", ctypes.c_int),
                ("waves", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{what} failed with cuBLAS status {rc}")


def choices(W: torch.Tensor, x: torch.Tensor, count: int = 8) -> list[dict]:
    """The heuristic's first `count` algorithms for F.linear(x, W) (x [M, K], W [N, K], fp16 on CUDA), each with
    its configuration and its result (a new [M, N] tensor). Column-major, as cuBLASLt sees it: y^T [N, M] =
    op(A) B with A = W read as K x N transposed and B = x read as K x M."""
    lt = ctypes.CDLL("libcublasLt.so.13")
    (M, K), N = x.shape, W.shape[0]
    handle, desc, pref = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    a, b, c = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    _check(lt.cublasLtCreate(ctypes.byref(handle)), "cublasLtCreate")
    _check(lt.cublasLtMatmulDescCreate(ctypes.byref(desc), ctypes.c_int(COMPUTE_32F), ctypes.c_int(R_32F)),
           "cublasLtMatmulDescCreate")
    op = ctypes.c_int32(OP_T)
    _check(lt.cublasLtMatmulDescSetAttribute(desc, ctypes.c_int(DESC_TRANSA), ctypes.byref(op), ctypes.c_size_t(4)),
           "TRANSA")
    for layout, rows, cols, ld in ((a, K, N, K), (b, K, M, K), (c, N, M, N)):
        _check(lt.cublasLtMatrixLayoutCreate(ctypes.byref(layout), ctypes.c_int(R_16F), ctypes.c_uint64(rows),
                                             ctypes.c_uint64(cols), ctypes.c_int64(ld)), "cublasLtMatrixLayoutCreate")
    _check(lt.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)), "cublasLtMatmulPreferenceCreate")
    workspace_bytes = ctypes.c_uint64(WORKSPACE_BYTES)
    _check(lt.cublasLtMatmulPreferenceSetAttribute(pref, ctypes.c_int(PREF_MAX_WORKSPACE), ctypes.byref(workspace_bytes),
                                                   ctypes.c_size_t(8)), "MAX_WORKSPACE_BYTES")
    results = (HeuristicResult * count)()
    returned = ctypes.c_int()
    _check(lt.cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, c, pref, ctypes.c_int(count), results,
                                             ctypes.byref(returned)), "cublasLtMatmulAlgoGetHeuristic")
    workspace = torch.empty(WORKSPACE_BYTES, device=x.device, dtype=torch.uint8)
    alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    picks = []
    for r in results[:returned.value]:
        config = {}
        for name, attr, ctype in CONFIG:
            value, written = ctype(), ctypes.c_size_t()
            _check(lt.cublasLtMatmulAlgoConfigGetAttribute(ctypes.byref(r.algo), ctypes.c_int(attr), ctypes.byref(value),
                                                           ctypes.c_size_t(ctypes.sizeof(ctype)), ctypes.byref(written)),
                   f"config {name}")
            config[name] = value.value
        config["reduction scheme"] = REDUCTION.get(config["reduction scheme"], config["reduction scheme"])
        y = torch.empty(M, N, device=x.device, dtype=torch.half)
        _check(lt.cublasLtMatmul(handle, desc, ctypes.byref(alpha), ctypes.c_void_p(W.data_ptr()), a,
                                 ctypes.c_void_p(x.data_ptr()), b, ctypes.byref(beta), ctypes.c_void_p(y.data_ptr()), c,
                                 ctypes.c_void_p(y.data_ptr()), c, ctypes.byref(r.algo),
                                 ctypes.c_void_p(workspace.data_ptr()), ctypes.c_size_t(WORKSPACE_BYTES), stream),
               "cublasLtMatmul")
        picks.append({"config": config, "workspace": r.workspace, "waves": r.waves, "result": y})
    torch.cuda.synchronize()
    for destroy, obj in ((lt.cublasLtMatmulPreferenceDestroy, pref), (lt.cublasLtMatrixLayoutDestroy, a),
                         (lt.cublasLtMatrixLayoutDestroy, b), (lt.cublasLtMatrixLayoutDestroy, c),
                         (lt.cublasLtMatmulDescDestroy, desc), (lt.cublasLtDestroy, handle)):
        destroy(obj)
    return picks
