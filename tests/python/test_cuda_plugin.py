"""The CUDA backend plugin (libkiln_cuda.so): the shared elementwise math
(src/ops/scalar_math.h, elementwise.def) compiled by nvcc gives torch's
results on the GPU. Skips without a GPU or without the plugin."""

import ctypes
import pathlib

import pytest
import torch

import kiln

PLUGIN = pathlib.Path(kiln.__file__).parent / "libkiln_cuda.so"

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and PLUGIN.exists()), reason="needs a GPU and kiln's CUDA plugin"
)

UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal, "sin": torch.sin, "cos": torch.cos,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu, "silu": torch.nn.functional.silu,
    "erf": torch.erf, "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
}


@pytest.fixture(scope="module")
def plugin():
    lib = ctypes.CDLL(str(PLUGIN))
    lib.kiln_cuda_unary_f32.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.POINTER(ctypes.c_char_p)]
    lib.kiln_cuda_device_count.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
    return lib


def test_device_count(plugin):
    err = ctypes.c_char_p()
    assert plugin.kiln_cuda_device_count(ctypes.byref(err)) == torch.cuda.device_count()


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_matches_torch(plugin, op):
    x = torch.randn(10007, dtype=torch.float32)
    if op in ("log", "sqrt", "rsqrt"):
        x = x.abs() + 0.1
    y = torch.empty_like(x)
    err = ctypes.c_char_p()
    rc = plugin.kiln_cuda_unary_f32(op.encode(), x.data_ptr(), y.data_ptr(), x.numel(), ctypes.byref(err))
    assert rc == 0, err.value
    expected = UNARY[op](x.cuda()).cpu()
    torch.testing.assert_close(y, expected, atol=2e-6, rtol=2e-6)
