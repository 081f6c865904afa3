"""Names only: torch dtypes and kiln dtypes, and ATen overload names."""

from __future__ import annotations

import torch

from kiln._kiln import DType

TORCH_TO_KILN = {
    torch.float32: DType.f32,
    torch.float16: DType.f16,
    torch.bfloat16: DType.bf16,
    torch.float64: DType.f64,
    torch.int64: DType.i64,
    torch.int32: DType.i32,
    torch.int16: DType.i16,
    torch.int8: DType.i8,
    torch.uint8: DType.u8,
    torch.bool: DType.bool,
}
KILN_TO_TORCH = {k.name: t for t, k in TORCH_TO_KILN.items()}


def kiln_dtype_name(dtype: torch.dtype) -> str | None:
    d = TORCH_TO_KILN.get(dtype)
    return None if d is None else d.name


def aten_name(target) -> str | None:
    """'aten.add.Tensor' for torch.ops.aten.add.Tensor; None for anything else."""
    if isinstance(target, torch._ops.OpOverload) and target.namespace == "aten":
        return f"aten.{target._schema.name.split('::')[1]}.{target._overloadname}"
    return None
