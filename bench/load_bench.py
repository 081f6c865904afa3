"""Cheap loading, measured: a torchvision resnet50 (random weights) compiled by
kiln, saved, then loaded in fresh processes, reporting
  - the file size;
  - peak host RSS growth while loading (kiln.load: map, check, compile the
    plan, bind the weights in place), which should stay within 1.1x the file
    size plus a small constant (the weights are mapped, never copied);
  - the same through the first result (adds the activation arena);
  - time from kiln.load to the first result, and of the load alone;
  - peak RSS of the whole `kiln run` process (C++ only, no Python);
  - the file saved without weights plus a safetensors file, for comparison;
  - whether every loaded program's result equals the in-process one bit for bit.

    python bench/load_bench.py [--batch 1] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, sys, time
from pathlib import Path

def status(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)

import torch
import kiln
torch.set_num_threads(int(sys.argv[4]))
import numpy as np
path, folder, weights = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
x = torch.from_numpy(np.load(folder / "x.npy"))
expected = torch.from_numpy(np.load(folder / sys.argv[5]))
Path("/proc/self/clear_refs").write_text("5")  # resets the peak (VmHWM) to the current RSS
base = status("VmRSS")
t0 = time.perf_counter()
program = kiln.load(path, weights=None if weights == "-" else weights)
t1 = time.perf_counter()
peak_load = status("VmHWM")
y = program(x)
t2 = time.perf_counter()
peak_first = status("VmHWM")
print(json.dumps(dict(load_s=t1 - t0, first_result_s=t2 - t0, rss_base=base,
                      load_peak_growth=peak_load - base, first_result_peak_growth=peak_first - base,
                      bit_exact=bool(torch.equal(y, expected)))))
"""


def child(path, weights, threads, expected):
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(Path(path).parent), weights, str(threads),
                          expected],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def cli_peak_rss(cli, path):
    """Peak RSS of one `kiln run` process, measured by a bare Python parent (its only child)."""
    probe = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
             "subprocess.run(sys.argv[1:], check=True, capture_output=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, time.perf_counter() - t)")
    folder = Path(path).parent
    out = subprocess.run([sys.executable, "-S", "-c", probe, cli, "run", str(path), "--input", str(folder / "x.npy"),
                          "--out", str(folder / "cli-out")], capture_output=True, text=True, check=True)
    peak, elapsed = out.stdout.split()
    return int(peak), float(elapsed)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=torch_threads_default())
    ap.add_argument("--keep", help="write the files here and keep them")
    ap.add_argument("--cli", help="the kiln command (default: beside python, or on PATH)")
    args = ap.parse_args()

    import numpy as np
    import torch
    import torchvision
    from safetensors.torch import save_file

    import kiln

    folder = Path(args.keep or tempfile.mkdtemp(prefix="kiln-load-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval()
    x = torch.randn(args.batch, 3, 224, 224)
    t0 = time.perf_counter()
    program = kiln.compile(model, [x])
    compile_s = time.perf_counter() - t0
    with torch.no_grad():
        expected = program(x)
    np.save(folder / "x.npy", x.numpy())
    np.save(folder / "expected.npy", expected.numpy())
    full, bare, st = folder / "resnet50.kiln", folder / "resnet50_bare.kiln", folder / "resnet50.safetensors"
    t0 = time.perf_counter()
    kiln.save(program, full)
    save_s = time.perf_counter() - t0
    size = full.stat().st_size

    program_nf = kiln.compile(model, [x], fold="none")
    kiln.save(program_nf, bare, weights=False)
    with torch.no_grad():
        np.save(folder / "expected_bare.npy", program_nf(x).numpy())
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, st)

    runs = [child(full, "-", args.threads, "expected.npy") for _ in range(args.repeat)]
    runs_st = [child(bare, str(st), args.threads, "expected_bare.npy") for _ in range(args.repeat)]
    best = lambda rs, k: min(r[k] for r in rs)  # noqa: E731
    mib = 1 << 20
    report = {
        "file_bytes": size,
        "compile_s": compile_s,
        "save_s": save_s,
        "load_s": best(runs, "load_s"),
        "load_to_first_result_s": best(runs, "first_result_s"),
        "load_peak_rss_growth_bytes": max(r["load_peak_growth"] for r in runs),
        "first_result_peak_rss_growth_bytes": max(r["first_result_peak_growth"] for r in runs),
        "load_peak_over_file": max(r["load_peak_growth"] for r in runs) / size,
        "safetensors_bytes": st.stat().st_size,
        "safetensors_load_to_first_result_s": best(runs_st, "first_result_s"),
        "safetensors_load_peak_rss_growth_bytes": max(r["load_peak_growth"] for r in runs_st),
        "bit_exact_with_in_process": all(r["bit_exact"] for r in runs + runs_st),
    }
    cli = args.cli or shutil.which("kiln", path=str(Path(sys.executable).parent)) or shutil.which("kiln")
    if cli is None:
        module = Path(kiln._kiln.__file__).resolve().parent / "kiln"
        cli = str(module) if module.exists() else None
    if cli:
        peak, elapsed = cli_peak_rss(cli, full)
        report["cli_run_peak_rss_bytes"] = peak
        report["cli_run_wall_s"] = elapsed
        report["cli_bit_exact_with_in_process"] = (
            np.load(folder / "cli-out" / "output_0.npy").tobytes() == np.load(folder / "expected.npy").tobytes())
    print(json.dumps(report, indent=2))
    print(f"\nresnet50, batch {args.batch}: file {size / mib:.1f} MiB; load peak RSS growth "
          f"{report['load_peak_rss_growth_bytes'] / mib:.1f} MiB ({report['load_peak_over_file']:.3f}x the file); "
          f"through the first result {report['first_result_peak_rss_growth_bytes'] / mib:.1f} MiB; "
          f"load {report['load_s'] * 1e3:.0f} ms, load to first result {report['load_to_first_result_s'] * 1e3:.0f} ms")
    if not args.keep:
        shutil.rmtree(folder)


def torch_threads_default():
    return max(1, min(2, os.cpu_count() or 1))


if __name__ == "__main__":
    main()
