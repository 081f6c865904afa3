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
    name = op_name(target) if isinstance(target, torch._ops.OpOverload) else None
    return name.replace("::", ".", 1) if name is not None and name.startswith("aten::") else None


def op_name(target) -> str | None:
    """'aten::add.Tensor' for an op overload, 'aten::add' for an op packet (any namespace); None for anything
    else."""
    if isinstance(target, torch._ops.OpOverload):
        return f"{target._schema.name}.{target._overloadname}"
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name  # a packet's attributes are its overloads: no .namespace
    return None
