"""Writes docs/ops.md from kiln's op table: every op with its ATen overloads,
dtypes and CPU/CUDA kernels, then every ATen overload the frontend lowers.

    python -m kiln.ops_doc > docs/ops.md

The page is generated, never edited by hand; tests/python/test_ops_doc.py
fails when it is stale."""

from __future__ import annotations

import sys

from kiln import _kiln

COMMAND = "python -m kiln.ops_doc > docs/ops.md"

_FLOATS = "f32, f16, bf16, f64"
_ALL = "all"
_ELEMENTWISE_DTYPES = {
    "arith": _ALL,
    "floating": f"{_FLOATS} (integers promote to f32)",
    "compare": f"{_ALL} → bool",
    "logical": f"{_ALL} (read as bool) → bool",
    "select": f"bool condition; {_ALL}",
}


def dtypes_of(op: dict) -> str:
    if op["elementwise_kind"]:
        return _ELEMENTWISE_DTYPES[op["elementwise_kind"]]
    return _FLOATS if op["floating_only"] else _ALL


def _inputs_of(op: dict) -> str:
    names = list(op["inputs"])
    if op["variadic"]:
        return f"{names[0]}…"
    optional = op["optional_inputs"]
    return ", ".join(n + ("?" if i >= len(names) - optional else "") for i, n in enumerate(names))


def _code_list(items) -> str:
    return ", ".join(f"`{i}`" for i in items)


def render() -> str:
    ops = _kiln.op_table()
    declared = {a: op["name"] for op in ops for a in op["aten"]}
    lines = [
        "# kiln ops",
        "",
        f"Generated from kiln's op table by `{COMMAND}`; do not edit by hand",
        "(tests/python/test_ops_doc.py fails when this page is stale).",
        "",
        "CPU: the CPU backend has a kernel for the op. CUDA: the CUDA plugin has one",
        "(src/ops/cuda_kernels.def, kept equal to the plugin's registrations by the same test).",
        "An op without a kernel on a device falls back to PyTorch there, with the reason in `kiln.explain`.",
        "",
        f"## Ops ({len(ops)})",
        "",
        "| op | inputs | attributes | ATen overloads | dtypes | CPU | CUDA |",
        "|---|---|---|---|---|---|---|",
    ]
    for op in ops:
        lines.append(
            f"| `{op['name']}` | {_inputs_of(op)} | {_code_list(op['attrs'])} | {_code_list(op['aten'])} | "
            f"{dtypes_of(op)} | {'yes' if op['cpu'] else 'no'} | {'yes' if op['cuda'] else 'no'} |"
        )
    targets = _kiln.aten_targets()
    lines += [
        "",
        f"## ATen overloads the frontend lowers ({len(targets)})",
        "",
        "An overload that an op above declares maps to that op; the others are composed by an adapter",
        "in src/builder/aten_*.cpp from several ops (or are views, casts and scalar forms).",
        "",
        "| ATen overload | op |",
        "|---|---|",
    ]
    for t in targets:
        lines.append(f"| `{t}` | {'`' + declared[t] + '`' if t in declared else 'adapter'} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
