"""The memory stage trace: what memory looked like at named stages of a compile.

Each compiled graph gets one MemoryTrace. Stages, in the order they happen:
  start       the compiler was entered
  import      partitioned and imported into kiln IR
  plan        each region's folds and precision decided (kiln.folding.prepare;
              allocates nothing: folds are computed on the first call)
  lower       optimized, memory-planned and lowered (one C++ call: planning
              allocates nothing, the arena comes with the first run)
  called      the graph's first region was first called (the time since
              "lower" is torch's: Dynamo's guards and bytecode, and
              aot_autograd's wrappers where it captured the graph)
  fold        a region's folded constants were computed (on its first call)
  first run   a region's first call finished
  after       the graph's first call finished: what compile leaves behind
Each stage holds the process RSS, the bytes kiln owns (activation arenas plus
folded constants) and, where CUDA is present, torch's allocated and reserved
bytes and the driver's used bytes for the device. The records are plain data
so a probe can print them as a table or plot them as a timeline.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time

log = logging.getLogger("kiln")

_MAX_TRACES = 64
_traces: list["MemoryTrace"] = []


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        try:
            import resource

            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # a peak, not the level
        except Exception:
            return None


@dataclasses.dataclass
class Stage:
    name: str
    seconds: float  # since the trace started
    rss_bytes: int | None
    kiln_bytes: int  # activation arenas + folded constants kiln holds
    cuda_allocated: int | None = None  # torch.cuda.memory_allocated(device)
    cuda_reserved: int | None = None  # torch.cuda.memory_reserved(device)
    driver_used: int | None = None  # total - free from the driver (cudaMemGetInfo)


@dataclasses.dataclass
class MemoryTrace:
    label: str
    device: str
    stages: list[Stage] = dataclasses.field(default_factory=list)
    started: float = dataclasses.field(default_factory=time.perf_counter, repr=False)

    def record(self, name: str, kiln_bytes: int = 0) -> Stage:
        import torch

        stage = Stage(name, time.perf_counter() - self.started, _rss_bytes(), kiln_bytes)
        if self.device.startswith("cuda") and torch.cuda.is_available():
            dev = torch.device(self.device)
            stage.cuda_allocated = torch.cuda.memory_allocated(dev)
            stage.cuda_reserved = torch.cuda.memory_reserved(dev)
            free, total = torch.cuda.mem_get_info(dev)
            stage.driver_used = total - free
        self.stages.append(stage)
        return stage

    def stage(self, name: str) -> Stage | None:
        """The last stage called `name`."""
        return next((s for s in reversed(self.stages) if s.name == name), None)

    def __str__(self) -> str:
        mib = lambda b: "-" if b is None else f"{b / 2**20:9.1f}"  # noqa: E731
        lines = [f"kiln memory, {self.label} on {self.device} (MiB)",
                 f"  {'stage':<12} {'ms':>8} {'rss':>9} {'kiln':>9} {'cuda alloc':>10} {'reserved':>9} {'driver':>9}"]
        for s in self.stages:
            lines.append(f"  {s.name:<12} {s.seconds * 1000:8.1f} {mib(s.rss_bytes)} {mib(s.kiln_bytes)} "
                         f"{mib(s.cuda_allocated):>10} {mib(s.cuda_reserved)} {mib(s.driver_used)}")
        return "\n".join(lines)


def new_trace(label: str, device: str) -> MemoryTrace:
    trace = MemoryTrace(label, device)
    _traces.append(trace)
    del _traces[:-_MAX_TRACES]
    trace.record("start")
    return trace


@dataclasses.dataclass
class MemoryReport:
    """kiln.memory_report(): the traces of the most recent compiles, oldest first."""

    traces: list[MemoryTrace]

    def __str__(self) -> str:
        return "\n".join(str(t) for t in self.traces) or "kiln memory: nothing compiled yet"


def memory_report(clear: bool = False) -> MemoryReport:
    report = MemoryReport(list(_traces))
    if clear:
        _traces.clear()
    return report


def log_trace(trace: MemoryTrace) -> None:
    log.warning("%s", trace)
