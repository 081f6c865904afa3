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
  On CUDA the freed blocks go back to the device once the region's folds are
  done (torch.cuda.empty_cache, outside any capture).
- Shared: a region's FoldedConstant points at a SharedConstant from the
  weight registry (kiln.weight_registry), one per (sources' storages,
  expression, dtype) across every graph of the process, so a constant used by
  several regions or graphs is computed and held once.
- Each constant records (data_ptr, _version) of its sources; a call that sees
  a change re-folds into the same buffer (no recompile). On CPU, and on a
  CUDA region's first call, that check comes before the region runs; later
  CUDA calls check after their launch, on the host while the device runs it,
  and a call that re-folded runs again on the same stream (kiln.region), so
  its outputs are always the new weights'. Folds run on the caller's stream.
  Inference tensors carry no version counter: for those only a moved storage
  is seen (an in-place change under inference_mode is not). A source released
  by donation (kiln.donation) cannot change: its constant is final.
- The constants hold no reference to their sources: the region's caller
  passes the weights on every call.
"""

from __future__ import annotations

import dataclasses
import operator
import time

import torch

from kiln import _kiln
from kiln.executable import compile_graph
from kiln.options import Options
from kiln.torch_types import KILN_TO_TORCH

_PRECISION_DTYPES = {"fp16": "f16", "bf16": "bf16"}
_DATA_PTR = torch.Tensor.data_ptr
_VERSION = operator.attrgetter("_version")


def _stamp(t: torch.Tensor) -> tuple[int, int]:
    try:
        version = t._version
    except RuntimeError:  # an inference tensor: no version counter
        version = -1
    return t.data_ptr(), version


def released(t: torch.Tensor) -> bool:
    """True when `t` lost its data to donation (its storage was emptied, its shape kept)."""
    return t.numel() > 0 and t.untyped_storage().nbytes() == 0


class ReleasedWeightError(RuntimeError):
    """A weight released by donate_weights=True is needed again."""


@dataclasses.dataclass(eq=False)
class SharedConstant:
    """One folded constant's buffer, shared by every region that folds the same expression of the same storages."""

    graph: _kiln.Graph  # inputs: the sources, in order; one output
    tensor: torch.Tensor | None = None  # the kiln-owned result
    stamps: list | None = None  # (data_ptr, version) of each source when last folded
    folds: int = 0  # how many times it was computed
    source_names: list | None = None  # the model's names for the sources, for errors
    # Stamps by the tensors that read it: tied tensors on one storage (two Parameters) carry their own
    # version counters, so each set of source tensors is compared with its own last-seen stamps.
    seen: dict = dataclasses.field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        return 0 if self.tensor is None else self.tensor.numel() * self.tensor.element_size()

    def stale(self, sources: list[torch.Tensor]) -> bool:
        if self.stamps is None:
            return True
        key = tuple(id(t) for t in sources)
        now = [_stamp(t) for t in sources]
        known = self.seen.get(key)
        if known is None:
            # Other tensors on the storages last folded from (an alias, or a released one): adopt their stamps.
            if any(n[0] != s[0] and not released(t) for t, n, s in zip(sources, now, self.stamps)):
                return True
            self.seen[key] = known = now
        # A released source keeps its last folded value: only a new storage (a replaced .data) counts.
        return any(n != k and not released(t) for t, n, k in zip(sources, now, known))

    def _check_sources(self, sources: list[torch.Tensor]) -> None:
        for i, t in enumerate(sources):
            if released(t):
                name = self.source_names[i] if self.source_names else f"source {i}"
                raise ReleasedWeightError(
                    f"kiln: weight '{name}' was released by donate_weights=True and this folded constant must be "
                    "computed from it again; donated weights cannot be re-folded (recompile without donate_weights "
                    "to update weights after compile)")

    def _device(self, sources: list[torch.Tensor], device: torch.device) -> torch.device:
        """Where the constant lives: its buffer's device once it has one, else the sources'."""
        return self.tensor.device if self.tensor is not None else sources[0].device if sources else device

    def compile(self, sources: list[torch.Tensor], device: torch.device):
        """The fold's executable, on the constant's device. Compiling allocates no arena, so every stale
        constant's executable can be compiled before any runs (their CUDA kernels compile side by side)."""
        self._check_sources(sources)
        return compile_graph(self.graph, device=str(self._device(sources, device)))

    def fold(self, sources: list[torch.Tensor], device: torch.device, exe, stream: int = 0) -> None:
        """Computes the constant into its buffer (allocated on the first fold) with `exe` (from compile()),
        which the caller drops right after, freeing the fold's intermediates. On CUDA the work goes on
        `stream` (the caller's current stream), in order with the region's calls."""
        self._check_sources(sources)  # again: folds before this one may have released sources (donation)
        out = self.graph.outputs()[0]
        if self.tensor is None:
            self.tensor = torch.empty(list(out.shape), dtype=KILN_TO_TORCH[out.dtype],
                                      device=self._device(sources, device))
        with torch.no_grad():
            exe.run([s.detach() for s in sources], [self.tensor], stream)
        self.stamps = self.seen[tuple(id(t) for t in sources)] = [_stamp(t) for t in sources]
        self.folds += 1


@dataclasses.dataclass(eq=False)
class FoldedConstant:
    """A region's view of one folded constant: its key in the region's program and where its sources are."""

    key: str  # the main graph's weight key, "fold:<n>"
    graph: _kiln.Graph  # inputs: the sources, in order; one output
    source_keys: list[str]
    shared: SharedConstant | None = None  # set by the weight registry; a private one otherwise

    def __post_init__(self):
        if self.shared is None:
            self.shared = SharedConstant(self.graph)

    @property
    def tensor(self) -> torch.Tensor | None:
        return self.shared.tensor

    @property
    def folds(self) -> int:
        return self.shared.folds

    @property
    def nbytes(self) -> int:
        return self.shared.nbytes


class RegionFolds:
    """The folded constants of one region and where their sources are among the region's arguments."""

    def __init__(self, folds: list[FoldedConstant], arg_of_key: dict[str, int]):
        self.constants = folds
        self.arg_indices = [[arg_of_key[k] for k in f.source_keys] for f in folds]
        self.bound: dict[str, torch.Tensor] = {}  # key -> the constant's buffer bound in the region's program
        self.donor = None  # kiln.donation.Donor under donate_weights: releases sources as their folds complete
        self.source_args = sorted({i for indices in self.arg_indices for i in indices})
        # args -> the source arguments, in C (a map of args.__getitem__ costs ResNet-50's 265 sources 12 us more)
        getter = operator.itemgetter(*self.source_args) if self.source_args else (lambda args: ())
        self._sources_of = getter if len(self.source_args) != 1 else (lambda args: (getter(args),))
        self.last_snapshot: list | None = None
        self.complete = False  # every constant computed (by a refresh that returned)
        # Host time of the last refresh that folded anything (the first call's, unless weights changed since):
        # compiling the folds' executables, running them, dropping them (freeing arenas, unloading generated
        # kernels), and each fold kernel's step_timings() (bench/compile_time.py --kernels).
        self.compile_s = 0.0
        self.run_s = 0.0
        self.drop_s = 0.0
        self.step_timings: list[tuple[str, str, float, float]] = []

    @property
    def nbytes(self) -> int:
        return sum(f.nbytes for f in self.constants)

    def refresh(self, args, exe, device: torch.device, stream: int = 0) -> int:
        """Re-folds every constant whose sources changed (all of them on the first call), on `stream` (a
        cudaStream_t as an int on CUDA); returns how many. A constant another region already computed from
        the same sources is only bound.

        The common call changes nothing: the sources' (tensor, storage, version) snapshot equals the last
        one, and no constant's buffer was replaced (a shared constant is re-folded into its own buffer), so
        the per-constant checks are skipped."""
        snapshot = self._snapshot(args)
        if snapshot is not None and snapshot == self.last_snapshot:
            return 0
        done = self._refresh(args, exe, device, stream)
        self.last_snapshot = self._snapshot(args)  # donation may have released sources just now
        self.complete = True
        return done

    def _snapshot(self, args) -> list | None:
        """ids, data pointers and version counters of the source arguments; None for inference tensors
        (no version counter), which always take the full check."""
        sources = self._sources_of(args)
        try:
            return [list(map(id, sources)), list(map(_DATA_PTR, sources)), list(map(_VERSION, sources))]
        except RuntimeError:
            return None

    def _refresh(self, args, exe, device: torch.device, stream: int) -> int:
        work = [(fold, [args[i] for i in indices]) for fold, indices in zip(self.constants, self.arg_indices)]
        stale, seen = [], set()
        for fold, sources in work:
            if id(fold.shared) not in seen and fold.shared.stale(sources):
                seen.add(id(fold.shared))
                stale.append((fold.shared, sources))
        if self.donor is not None:
            self.donor.begin([t for _, sources in stale for t in sources])
        # Every stale constant's executable first, then one fold at a time, each executable (and its
        # arena of intermediates) dropped as soon as its constant is written.
        programs, timings, run_s, drop_s = [], [], 0.0, 0.0
        try:
            start = time.perf_counter()
            programs.extend(shared.compile(sources, device) for shared, sources in stale)
            compile_s = time.perf_counter() - start
            for k, (shared, sources) in enumerate(stale):
                start = time.perf_counter()
                shared.fold(sources, device, programs[k], stream)
                run_s += time.perf_counter() - start
                timings.extend(programs[k].step_timings())
                start = time.perf_counter()
                programs[k] = None
                drop_s += time.perf_counter() - start
                if self.donor is not None:
                    self.donor.after_fold(sources)
        finally:
            programs.clear()  # on an error too: a traceback that keeps this frame keeps no executable
        if stale:
            self.compile_s, self.run_s, self.drop_s, self.step_timings = compile_s, run_s, drop_s, timings
        for fold, _ in work:
            if self.bound.get(fold.key) is not fold.shared.tensor:
                exe.bind_weight(fold.key, fold.shared.tensor)
                self.bound[fold.key] = fold.shared.tensor
        if stale and device.type == "cuda" and not torch.cuda.is_current_stream_capturing():
            torch.cuda.empty_cache()  # the fold arenas' (and released weights') blocks go back to the device
        return len(stale)


def prepare(graph: _kiln.Graph, options: Options, device: torch.device | None = None) -> list[FoldedConstant]:
    """Rewrites `graph` in place (precision, batch norm, layout, folds); returns its folded constants."""
    if options.fold != "none":
        _kiln.fold_batch_norm(graph)  # first, so the folded weight and bias are computed in full precision
    if options.precision != "keep":
        _kiln.lower_precision(graph, _PRECISION_DTYPES[options.precision])
    if options.fold == "none":
        return []
    if device is not None and device.type == "cuda":
        _kiln.patchify_convs(graph)  # before choose_layout would take patch embeddings into NHWC chains
        _kiln.choose_layout(graph)  # f16/bf16 conv chains in NHWC; weight re-layouts become folds below
    return [FoldedConstant(key, g, list(sources)) for key, g, sources in _kiln.split_weight_folds(graph)]
