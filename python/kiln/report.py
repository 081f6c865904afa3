"""What kiln did with a model: per graph, each ATen node lowered or left to
PyTorch (with the reason), the kiln regions and their op counts."""

from __future__ import annotations

import dataclasses
from collections import Counter


@dataclasses.dataclass
class GraphReport:
    decisions: list  # partition.NodeDecision, in graph order
    regions: list  # (region name, {kiln op: count}, arena bytes)
    compile_seconds: float
    region_modules: list = dataclasses.field(default_factory=list, repr=False)  # the KilnRegion modules
    memory: object = dataclasses.field(default=None, repr=False)  # memory_trace.MemoryTrace of this compile
    # How Dynamo's graph became ATen: "one trace" (kiln.aten_capture) or "aot_autograd (why)"; empty for
    # kiln.compile's torch.export graphs
    capture: str = ""

    @property
    def lowered(self):
        return [d for d in self.decisions if d.lowered]

    @property
    def fallbacks(self):
        return [d for d in self.decisions if not d.lowered]

    def kernel_timings(self) -> dict[str, list]:
        """Host milliseconds of this graph's compile by kernel kind: {kind: [count, lower_ms, first_run_ms]}
        over its regions' kernels, and its folds' kernels as "fold: kind" (Executable.step_timings; a
        first_run_ms of a kernel not run yet counts 0)."""
        return _kernel_table([self])

    def __str__(self) -> str:
        lines = [
            f"kiln graph: {len(self.lowered)} ATen nodes lowered, {len(self.fallbacks)} fell back, "
            f"{len(self.regions)} region(s), compiled in {self.compile_seconds * 1000:.0f} ms"
            + (f"; captured by {self.capture}" if self.capture else "")
        ]
        for name, counts, arena in self.regions:
            ops = ", ".join(f"{op}×{n}" for op, n in sorted(counts.items()))
            lines.append(f"  region {name}: arena {arena} bytes; {ops}")
        for d in self.fallbacks:
            lines.append(f"  fallback {d.node} ({d.target}): {d.reason}")
        return "\n".join(lines)


@dataclasses.dataclass
class Report:
    """kiln.explain's result: one GraphReport per compiled graph (graph breaks give several)."""

    graphs: list[GraphReport]

    @property
    def lowered(self):
        return [d for g in self.graphs for d in g.lowered]

    @property
    def fallbacks(self):
        return [d for g in self.graphs for d in g.fallbacks]

    def kernel_timings(self) -> dict[str, list]:
        """GraphReport.kernel_timings summed over every graph."""
        return _kernel_table(self.graphs)

    def lowered_ops(self) -> Counter:
        return Counter(d.target for d in self.lowered)

    def fallback_ops(self) -> Counter:
        return Counter(d.target for d in self.fallbacks)

    def __str__(self) -> str:
        head = (
            f"kiln: {len(self.graphs)} graph(s), {len(self.lowered)} ATen nodes lowered, "
            f"{len(self.fallbacks)} fell back to PyTorch"
        )
        return "\n".join([head] + [str(g) for g in self.graphs])


def _kernel_table(graphs) -> dict[str, list]:
    table: dict[str, list] = {}

    def add(timings, prefix=""):
        for _node, kind, lower_ms, first_run_ms in timings:
            row = table.setdefault(prefix + kind, [0, 0.0, 0.0])
            row[0] += 1
            row[1] += lower_ms
            row[2] += max(first_run_ms, 0.0)

    for graph in graphs:
        for region in graph.region_modules:
            add(region.exe.step_timings())
            if region.folds is not None:
                add(region.folds.step_timings, "fold: ")
    return table
