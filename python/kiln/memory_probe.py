"""The memory probe: what torch.compile(backend="kiln") costs in memory on top of the eager model.

    python -m kiln.memory_probe --layers 24 --width 8192 --device cuda [--dtype fp16|fp32]
        [--precision keep|fp16] [--donate] [--png timeline.png]

Builds a stack of Linear(width, width, bias=False) layers in `dtype`, runs it
eagerly (the reference output and latency), compiles a tiny model once so
that torch's and kiln's one-time imports are in the baseline, then compiles
the stack with kiln and
runs it, sampling memory every few milliseconds: the driver's used memory on
CUDA (torch's allocated and reserved too), the process RSS on CPU. Prints
kiln's stage trace (kiln.memory_report), the peak during compile and the level
held after, both over the eager model, the max abs diff against eager and the
latencies, and writes the timeline as a PNG when matplotlib is installed.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import statistics
import threading
import time

import torch

MIB = 2**20
_DTYPES = {"fp16": torch.float16, "fp32": torch.float32, "bf16": torch.bfloat16}


@dataclasses.dataclass
class Sample:
    seconds: float  # since the compile started
    used: int  # driver used bytes (CUDA) or RSS (CPU)
    allocated: int | None = None  # torch.cuda.memory_allocated
    reserved: int | None = None  # torch.cuda.memory_reserved


@dataclasses.dataclass
class ProbeResult:
    device: str
    weight_bytes: int  # the eager model's weights
    base: Sample  # the eager model resident, before compile
    peak: int  # the highest `used` from compile start to the first compiled call's end
    after: Sample  # after compile and the first call
    max_abs_diff: float
    eager_ms: float
    kiln_ms: float
    samples: list[Sample]
    report: object  # kiln.memory_report() of this compile
    released: int  # weights released by donation
    t0: float  # perf_counter() when the compile started (the samples' clock)
    peak_allocated: int | None = None  # torch.cuda.max_memory_allocated from compile start to the first call's end

    @property
    def peak_over_eager(self) -> int:
        return self.peak - self.base.used

    @property
    def after_over_eager(self) -> int:
        return self.after.used - self.base.used

    def summary(self) -> str:
        mib = lambda b: f"{b / MIB:+.0f} MiB"  # noqa: E731
        measure = "driver used" if self.device.startswith("cuda") else "process RSS"
        lines = [
            f"weights {self.weight_bytes / MIB:.0f} MiB on {self.device}; on top of the eager model ({measure}): "
            f"peak during compile {mib(self.peak_over_eager)}, held after compile {mib(self.after_over_eager)}",
            f"after compile the process holds {self.after.used / MIB:.0f} MiB in all "
            f"({self.after.used / max(self.weight_bytes, 1):.2f}x the eager weights; before compile "
            f"{self.base.used / MIB:.0f} MiB)",
            f"max abs diff vs eager {self.max_abs_diff:.3g}; latency eager {self.eager_ms:.3f} ms, "
            f"kiln {self.kiln_ms:.3f} ms; weights released by donation: {self.released}",
        ]
        if self.after.allocated is not None:
            lines.insert(1, f"torch allocated {mib(self.after.allocated - self.base.allocated)}, reserved "
                            f"{mib(self.after.reserved - self.base.reserved)} after compile (over eager); torch "
                            f"allocated in all {self.after.allocated / MIB:.0f} MiB "
                            f"({self.after.allocated / max(self.weight_bytes, 1):.2f}x the eager weights); torch "
                            f"allocated peak during compile {mib(self.peak_allocated - self.base.allocated)}")
        return "\n".join(lines)


def _sample(device: torch.device, t0: float) -> Sample:
    now = time.perf_counter() - t0
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        return Sample(now, total - free, torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device))
    from kiln.memory_trace import _rss_bytes

    return Sample(now, _rss_bytes() or 0)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _median_ms(fn, x, device, iters: int) -> float:
    times = []
    for _ in range(iters):
        _sync(device)
        start = time.perf_counter()
        fn(x)
        _sync(device)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def build_model(layers: int, width: int, dtype: torch.dtype, device: torch.device) -> torch.nn.Module:
    torch.manual_seed(0)
    with torch.device(device):
        model = torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False, dtype=dtype) for _ in range(layers)])
    with torch.no_grad():
        for layer in model:  # keep activations O(1) through the stack
            layer.weight.mul_(width**-0.5 / layer.weight.abs().mean().clamp_min(1e-12) * 0.8)
    return model.eval()


def warm_up(device: torch.device, dtype: torch.dtype, precision: str = "keep") -> None:
    """Compiles a tiny model once, so that what torch and kiln load on first use (Dynamo, aot_autograd,
    their caches) is in the baseline and not counted as the compile's cost."""
    import kiln

    tiny = build_model(2, 16, dtype, device)
    torch.compile(tiny, backend="kiln", options={"precision": precision})(torch.randn(2, 16, dtype=dtype, device=device))
    torch._dynamo.reset()
    kiln.memory_report(clear=True)


def run_probe(layers: int = 24, width: int = 8192, device: str = "cpu", dtype: str = "fp16", precision: str = "keep",
              donate: bool = False, batch: int = 8, iters: int = 10, interval: float = 0.005) -> ProbeResult:
    import kiln

    dev = torch.device(device)
    model = build_model(layers, width, _DTYPES[dtype], dev)
    x = torch.randn(batch, width, dtype=_DTYPES[dtype], device=dev)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    with torch.no_grad():
        expected = model(x)
        eager_ms = _median_ms(model, x, dev, iters)  # measured before compile: donation ends eager runs
        warm_up(dev, _DTYPES[dtype], precision)
    gc.collect()
    _sync(dev)
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
    t0 = time.perf_counter()
    base = _sample(dev, t0)
    samples = [base]
    done = threading.Event()

    def sampler():
        while not done.is_set():
            samples.append(_sample(dev, t0))
            time.sleep(interval)

    thread = threading.Thread(target=sampler, daemon=True)
    kiln.memory_report(clear=True)
    thread.start()
    options = {"precision": precision, "donate_weights": donate}
    compiled = torch.compile(model, backend="kiln", options=options)
    try:
        with torch.no_grad():
            out = compiled(x)
        _sync(dev)
    finally:
        done.set()
        thread.join()
    samples.append(_sample(dev, t0))
    peak = max(s.used for s in samples)
    peak_allocated = torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else None
    report = kiln.memory_report()
    gc.collect()
    after = _sample(dev, t0)
    with torch.no_grad():
        kiln_ms = _median_ms(compiled, x, dev, iters)
    diff = (out.float() - expected.float()).abs().max().item()
    released = sum(1 for p in model.parameters() if p.untyped_storage().nbytes() == 0)
    return ProbeResult(str(dev), weight_bytes, base, peak, after, diff, eager_ms, kiln_ms, samples, report, released,
                       t0, peak_allocated)


def write_png(result: ProbeResult, path: str, title: str) -> str | None:
    """Writes the memory timeline; returns why not when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install -r requirements/dev.txt): no PNG written"
    base = result.base
    t = [s.seconds for s in result.samples]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    label = "driver used" if result.device.startswith("cuda") else "process RSS"
    ax.plot(t, [(s.used - base.used) / MIB for s in result.samples], label=label)
    if base.allocated is not None:
        ax.plot(t, [(s.allocated - base.allocated) / MIB for s in result.samples], label="torch allocated")
        ax.plot(t, [(s.reserved - base.reserved) / MIB for s in result.samples], label="torch reserved")
    top = max((s.used - base.used) / MIB for s in result.samples)
    for trace in result.report.traces:
        for stage in trace.stages:
            at = trace.started + stage.seconds - result.t0
            ax.axvline(at, color="grey", lw=0.5)
            ax.text(at, top, stage.name, rotation=90, va="top", fontsize=7)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("seconds since torch.compile")
    ax.set_ylabel(f"MiB over the eager model ({result.weight_bytes / MIB:.0f} MiB of weights)")
    ax.set_title(title)
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kiln.memory_probe", description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--width", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=sorted(_DTYPES), default="fp16", help="the eager model's dtype")
    parser.add_argument("--precision", choices=["keep", "fp16", "bf16"], default="keep", help="kiln's precision option")
    parser.add_argument("--donate", action="store_true", help="compile with donate_weights=True")
    parser.add_argument("--iters", type=int, default=10, help="calls timed for each latency")
    parser.add_argument("--png", help="write the memory timeline to this PNG")
    args = parser.parse_args(argv)
    result = run_probe(args.layers, args.width, args.device, args.dtype, args.precision, args.donate, args.batch,
                       args.iters)
    print(result.report)
    print(result.summary())
    if args.png:
        title = (f"kiln: {args.layers} x Linear({args.width}) {args.dtype}, precision={args.precision}"
                 f"{', donate_weights' if args.donate else ''}, {result.device}")
        why_not = write_png(result, args.png, title)
        print(why_not or f"timeline written to {args.png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
