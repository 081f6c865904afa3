"""The model zoo at full size on the GPU, in fp16 and bf16: each model is
compiled with backend="kiln", compared with eager at the dtype's tolerance,
and the results (pass, max diff, fallbacks, compile time) are written as JSON
lines and as the markdown table for docs/models.md.

    PYTHONPATH=<kiln build's python dir> python bench/zoo_gpu.py --out zoo_gpu

writes zoo_gpu.jsonl and zoo_gpu.md (add --models a,b to run some models only,
--dtypes bf16 for one dtype). A model that fails to build or compile is
recorded with its error and the run goes on."""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import sys
import traceback

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))

from zoo import run, table  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="zoo_gpu", help="output path without extension")
    parser.add_argument("--models", default="", help="comma-separated zoo names (default: all)")
    parser.add_argument("--dtypes", default="fp16,bf16")
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/zoo_gpu.py needs a CUDA GPU")
    names = [n for n in args.models.split(",") if n] or run.NAMES
    records, errors = [], []
    for tag in args.dtypes.split(","):
        for name in names:
            torch._dynamo.reset()
            try:
                result = run.run(name, dtype=DTYPES[tag], device="cuda", full=True, batch=args.batch)
                records.append(run.as_record(result))
                print(f"{name} {tag}: {'pass' if result.passed else 'FAIL'} diff {result.max_diff:.3g} "
                      f"fallbacks {sorted(result.fallbacks)} compile {result.compile_seconds:.1f}s", flush=True)
            except Exception as e:  # noqa: BLE001 - one model's failure is a result, not the end of the run
                errors.append((name, tag, f"{type(e).__name__}: {e}"))
                traceback.print_exc()
            torch.cuda.empty_cache()
    out = pathlib.Path(args.out)
    out.with_suffix(".jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    head = (f"GPU zoo run: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
            f"python {platform.python_version()}, batch {args.batch}\n\n")
    failed = "".join(f"- {n} ({t}): {e}\n" for n, t, e in errors)
    out.with_suffix(".md").write_text(head + table.render(records) + (f"\nErrors:\n{failed}" if failed else ""))
    print(f"wrote {out.with_suffix('.jsonl')} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
