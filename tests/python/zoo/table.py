"""Turns zoo results (JSON lines that test_zoo.py writes when KILN_ZOO_RESULTS
names a file, or bench/zoo_gpu.py) into the markdown table of docs/models.md.

    python tests/python/zoo/table.py results.jsonl"""

from __future__ import annotations

import json
import sys


def render(records) -> str:
    lines = [
        "| model | dtype | pass | max diff | allowed | fallbacks | compile (s) | kiln part (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(records, key=lambda r: (r["dtype"], r["name"])):
        fallbacks = ", ".join(f"`{op.removeprefix('aten.')}`" for op in sorted(r["fallbacks"])) or "none"
        lines.append(
            f"| {r['name']} | {r['dtype']} | {'yes' if r['passed'] else '**no**'} | {r['max_diff']:.2g} | "
            f"{r['allowed']:.2g} | {fallbacks} | {r['compile_seconds']:.1f} | {r['kiln_seconds']:.2f} |")
    return "\n".join(lines) + "\n"


def main(path: str) -> None:
    with open(path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    sys.stdout.write(render(records))


if __name__ == "__main__":
    main(sys.argv[1])
