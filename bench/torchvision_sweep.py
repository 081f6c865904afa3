"""Every torchvision classification model through backend="kiln": the difference
from eager (and the output's scale) and what fell back, one JSON line per model.
A coverage sweep wider than the zoo (tests/python/zoo/), for docs/models.md.

    python bench/torchvision_sweep.py [--device cpu] [--skip vit_h_14,...] [--out sweep.jsonl]

Random weights, batch 1, 64x64 images (75 for inception_v3, 224 for maxvit_t,
image_size=64 for the ViTs). A model that fails to build or compile is recorded
with its error and the sweep goes on."""

from __future__ import annotations

import argparse
import functools
import json
import time

import torch
import torchvision

from kiln.dynamo_backend import kiln_backend


def build(name: str):
    """The model and its input side."""
    kwargs, side = {}, 64
    if name.startswith("vit_"):
        kwargs = {"image_size": 64}
    if name in ("inception_v3", "googlenet"):
        kwargs = {"aux_logits": False, "init_weights": False}
        side = 75 if name == "inception_v3" else side
    if name.startswith("maxvit"):
        side = 224
    return torchvision.models.get_model(name, weights=None, **kwargs).eval(), side


def sweep_one(name: str, device: str) -> dict:
    torch._dynamo.reset()
    torch.manual_seed(0)
    try:
        model, side = build(name)
        model = model.to(device)
        x = torch.randn(1, 3, side, side, device=device)
        reports = []
        compiled = torch.compile(model, backend=functools.partial(kiln_backend, reports=reports))
        with torch.no_grad():
            want = model(x)
            start = time.perf_counter()
            got = compiled(x)
            seconds = time.perf_counter() - start
        fallbacks = {}
        for report in reports:
            for d in report.fallbacks:
                fallbacks.setdefault(d.target, d.reason)
        return {"name": name, "diff": (got - want).abs().max().item(), "scale": want.abs().max().item(),
                "fallbacks": fallbacks, "seconds": round(seconds, 1)}
    except Exception as e:  # noqa: BLE001 - one model's failure is a result, not the end of the sweep
        return {"name": name, "error": f"{type(e).__name__}: {str(e)[:300]}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--skip", default="", help="comma-separated model names to leave out")
    parser.add_argument("--out", default="torchvision_sweep.jsonl")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    with open(args.out, "a") as out:
        for name in torchvision.models.list_models(module=torchvision.models):
            if name in skip:
                continue
            record = sweep_one(name, args.device)
            out.write(json.dumps(record) + "\n")
            out.flush()
            print(name, record.get("error") or (f"{record['diff']:.3g} of {record['scale']:.3g}",
                                               sorted(record["fallbacks"])), flush=True)


if __name__ == "__main__":
    main()
