"""Where kiln's "import" stage goes (the first compile stage: FX clean-ups, partitioning, and building
kiln's graph node by node), by wall-clock timers around its parts, not cProfile: on the GPU machine's
Python 3.12, cProfile under Dynamo gives nested counts that do not add up (docs/benchmarks.md, run 22).
One benchmark model compiled by kiln in a fresh process, after a tiny model has loaded Dynamo and kiln
(as in bench/compile_time.py). Prints each timed part's calls and seconds, and the import stage's total
from kiln's stage trace. Parts nest (partition holds the node imports), so the column does not add up.
Then the backend's support check (on CUDA it lowers each new kind of node) by ATen op, the costliest first,
with how many of its checks asked the backend rather than kiln's support cache (_kiln.support_cache_stats).

    python bench/import_stage_split.py MODEL [--device cuda]

MODEL is one of bench/compile_time.py's (resnet50, vit_b_16, bert, gpt2); fp16 on CUDA, fp32 on the CPU."""

from __future__ import annotations

import argparse
import functools
import time

from compile_time import _build, _dtype

SPENT: dict[str, list] = {}  # part -> [calls, seconds, the longest call]
BY_OP: dict[str, list] = {}  # ATen op -> [calls, seconds, the longest call, backend asks] of the support check
CURRENT = [None]  # the ATen op whose node the import is adding (fx_import.aten_name's last answer)


def _add(table: dict, key: str, spent: float, asks: int = 0) -> None:
    """One call of `spent` seconds into table[key]: [calls, seconds, the longest call, backend asks]."""
    entry = table.setdefault(key, [0, 0.0, 0.0, 0])
    entry[0] += 1
    entry[1] += spent
    entry[2] = max(entry[2], spent)
    entry[3] += asks


def _asks() -> int:
    """How often a support check has asked a backend itself (not answered from kiln's support cache)."""
    from kiln import _kiln

    stats = _kiln.support_cache_stats()
    return stats["asked"] + stats["uncacheable"]


def timed(owner, name: str, label: str, op_table: dict | None = None) -> None:
    """Replaces owner.name by a wrapper that adds its calls and wall seconds to SPENT[label], and to
    op_table under the ATen op that fx_import.aten_name named last when op_table is given, with how often
    the call asked a backend (_asks)."""
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        asks = _asks() if op_table is not None else 0
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent = time.perf_counter() - start
            _add(SPENT, label, spent)
            if op_table is not None:
                _add(op_table, str(CURRENT[0]), spent, _asks() - asks)

    setattr(owner, name, wrapper)


def remember_op(fx_import) -> None:
    """Wraps fx_import.aten_name so that CURRENT holds the ATen op of the node being imported."""
    original = fx_import.aten_name

    @functools.wraps(original)
    def wrapper(target):
        CURRENT[0] = original(target)
        return CURRENT[0]

    fx_import.aten_name = wrapper


def install() -> None:
    from kiln import _kiln, compile_fx, fx_import, partition

    for name in ("rewrite_as_strided_views", "inline_small_constants", "partition"):
        timed(compile_fx, name, f"compile_fx.{name}")
    for name in ("static_reason", "_whole_graph_region", "_import_regions", "_copy_module", "_decisions"):
        timed(partition, name, f"partition.{name}")
    for name in ("import_nodes", "import_graph"):
        timed(partition, name, f"fx_import.{name}")
    for name in ("schema_args", "_check_types", "_type_of", "aten_name"):
        timed(fx_import, name, f"fx_import.{name}")
    remember_op(fx_import)
    for name in ("aten", "unsupported_since", "weight", "input", "set_outputs"):
        timed(_kiln.Graph, name, f"_kiln.Graph.{name}", BY_OP if name == "unsupported_since" else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    import torch

    import kiln
    from kiln.memory_probe import warm_up

    model, inputs = _build(args.model, args.device)
    with torch.no_grad():
        warm_up(torch.device(args.device), _dtype(args.device))
        install()
        torch.compile(model, backend="kiln")(*inputs)
        if args.device == "cuda":
            torch.cuda.synchronize()
    imports = []
    for trace in kiln.memory_report().traces:
        stages = {s.name: s.seconds for s in trace.stages}
        if "import" in stages and "start" in stages:
            imports.append(stages["import"] - stages["start"])
    print(f"{args.model} on {args.device}, torch {torch.__version__}: kiln's import stage {sum(imports):.3f} s "
          f"over {len(imports)} graph(s)")
    print("| part | calls | s |")
    print("|---|---|---|")
    for label, (calls, seconds, *_) in sorted(SPENT.items(), key=lambda item: -item[1][1]):
        print(f"| {label} | {calls} | {seconds:.3f} |")
    print("\nThe backend's support check (Graph.unsupported_since) by ATen op, the 12 costliest; 'asked' counts")
    print("the checks of kiln nodes that went to the backend, the rest came from kiln's support cache:")
    print("| ATen op | calls | asked | s | longest call s |")
    print("|---|---|---|---|---|")
    for op, (calls, seconds, longest, asks) in sorted(BY_OP.items(), key=lambda item: -item[1][1])[:12]:
        print(f"| {op} | {calls} | {asks} | {seconds:.3f} | {longest:.4f} |")
    asks = sum(entry[3] for entry in BY_OP.values())
    print(f"all ops: {sum(entry[0] for entry in BY_OP.values())} calls, {asks} asked the backend")


if __name__ == "__main__":
    main()
