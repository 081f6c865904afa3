"""Folded constants (Note [Weight folds] in src/passes/weight_folds.h).

prepare() rewrites a region's kiln graph before it is compiled: precision
lowering (the casts it puts on weights become folds), batch norm into the
preceding convolution, then the C++ split into a main graph and one small
fold graph per folded constant. The Python side only runs those graphs:

- Folding is lazy: Dynamo hands the compiler fake tensors, so each folded
  constant is computed on the region's first call, from the real weights.
- One constant at a time: its fold graph is compiled, run straight into the
  constant's final buffer (a torch tensor on the weight's device, so torch's
  memory statistics count it), and dropped with its arena of intermediates
  before the next one starts. Only the fold graph's IR is kept, for re-folds.
- Each constant records (data_ptr, _version) of its sources; a call that sees
  a change re-folds into the same buffer before running (no recompile).
  Inference tensors carry no version counter: for those only a moved storage
  is seen (an in-place change under inference_mode is not).
- The constants hold no reference to their sources: the region's caller
  passes the weights on every call.
"""

from __future__ import annotations

import dataclasses

import torch

from kiln import _kiln
from kiln.executable import compile_graph
from kiln.options import Options
from kiln.torch_types import KILN_TO_TORCH

_PRECISION_DTYPES = {"fp16": "f16", "bf16": "bf16"}


def _stamp(t: torch.Tensor) -> tuple[int, int]:
    try:
        version = t._version
    except RuntimeError:  # an inference tensor: no version counter
        version = -1
    return t.data_ptr(), version


@dataclasses.dataclass(eq=False)
class FoldedConstant:
    key: str  # the main graph's weight key, "fold:<n>"
    graph: _kiln.Graph  # inputs: the sources, in order; one output
    source_keys: list[str]
    tensor: torch.Tensor | None = None  # the kiln-owned result
    stamps: list | None = None  # (data_ptr, version) of each source when last folded
    folds: int = 0  # how many times it was computed

    @property
    def nbytes(self) -> int:
        return 0 if self.tensor is None else self.tensor.numel() * self.tensor.element_size()

    def stale(self, sources: list[torch.Tensor]) -> bool:
        return self.stamps is None or any(_stamp(t) != s for t, s in zip(sources, self.stamps))

    def fold(self, sources: list[torch.Tensor], device: torch.device) -> bool:
        """Computes the constant into its buffer; True when the buffer is new (bind it)."""
        out = self.graph.outputs()[0]
        fresh = self.tensor is None
        if fresh:
            where = sources[0].device if sources else device
            self.tensor = torch.empty(list(out.shape), dtype=KILN_TO_TORCH[out.dtype], device=where)
        exe = compile_graph(self.graph, device=str(self.tensor.device))
        with torch.no_grad():
            exe.run([s.detach() for s in sources], [self.tensor])
        del exe  # its arena (the fold's intermediates) goes now, before the next fold
        self.stamps = [_stamp(t) for t in sources]
        self.folds += 1
        return fresh


class RegionFolds:
    """The folded constants of one region and where their sources are among the region's arguments."""

    def __init__(self, folds: list[FoldedConstant], arg_of_key: dict[str, int]):
        self.constants = folds
        self.arg_indices = [[arg_of_key[k] for k in f.source_keys] for f in folds]

    @property
    def nbytes(self) -> int:
        return sum(f.nbytes for f in self.constants)

    def refresh(self, args, exe, device: torch.device) -> int:
        """Re-folds every constant whose sources changed (all of them on the first call); returns how many."""
        done = 0
        for fold, indices in zip(self.constants, self.arg_indices):
            sources = [args[i] for i in indices]
            if not fold.stale(sources):
                continue
            if fold.fold(sources, device):
                exe.bind_weight(fold.key, fold.tensor)
            done += 1
        if done and device.type == "cuda":
            torch.cuda.empty_cache()  # the fold arenas' blocks go back to the device
        return done


def prepare(graph: _kiln.Graph, options: Options) -> list[FoldedConstant]:
    """Rewrites `graph` in place (precision, batch norm, folds); returns its folded constants."""
    if options.fold != "none":
        _kiln.fold_batch_norm(graph)  # first, so the folded weight and bias are computed in full precision
    if options.precision != "keep":
        _kiln.lower_precision(graph, _PRECISION_DTYPES[options.precision])
    if options.fold == "none":
        return []
    return [FoldedConstant(key, g, list(sources)) for key, g, sources in _kiln.split_weight_folds(graph)]
