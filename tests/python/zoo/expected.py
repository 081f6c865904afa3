"""The expected-fallbacks file (expected_fallbacks.toml): for each zoo model
and dtype, the ATen overloads that fall back to PyTorch, each with a reason."""

from __future__ import annotations

import pathlib
import tomllib

PATH = pathlib.Path(__file__).with_name("expected_fallbacks.toml")


def load() -> dict:
    """{"<model>" or "<model>.<dtype>": {ATen overload: reason}}; a model not listed has none.

    In the file, `[model]` lists the f32 fallbacks as `"aten.x.default" = "reason"`
    and `[model.bf16]` those of the bf16 run."""
    with PATH.open("rb") as f:
        table = tomllib.load(f)
    out = {}
    for model, entries in table.items():
        out[model] = {op: why for op, why in entries.items() if isinstance(why, str)}
        for tag, ops in entries.items():
            if isinstance(ops, dict):
                out[f"{model}.{tag}"] = dict(ops)
    return {k: v for k, v in out.items() if v}


def key(name: str, dtype_tag: str) -> str:
    return name if dtype_tag == "f32" else f"{name}.{dtype_tag}"
