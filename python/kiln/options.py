"""Compile options: one validated record; unknown names raise an error listing the valid ones.

precision: "keep" runs the model in its own dtypes. "fp16" / "bf16" compile
an fp32 model to run its floating-point math in half precision: each kiln
region casts its floating inputs down where the call enters and casts its
outputs back where they leave, so the caller sees the eager dtypes (and the
torch code between regions runs in fp32 as before). Weights are cast once,
as folded constants (kiln.folding): a call pays nothing for the casts and
kiln holds only the half-precision copies. Weight-only math (a batch norm
folded into a convolution) is computed in fp32 before the cast. With
fold="none" the casts stay in the program and run on every call. Results
match eager within the half dtype's tolerance, not fp32's.

fold: "auto" folds weight-only expressions where that pays at run time
(precision casts, batch norm into convolution, other weight-only math no
larger than the weights it reads) and never materializes a view a kernel can
absorb (a transposed GEMM weight); folded constants are re-folded on the next
call when a source weight changes in place. "none" folds nothing.

cuda_graph_new_addresses: what a CUDA call does when its inputs or outputs are
at addresses none of the executable's kept graphs (up to four) was recorded
with. "update" re-records one graph (host time for every kernel launch),
"slots" copies the inputs into static slots, replays one graph recorded on
them and copies the outputs out (device time for the copies, memory the size
of the inputs and outputs), and "choose" (the default) times the first update
and then takes slots whenever their estimated copy time is lower. Results are
the same either way; src/runtime/executable.h has the measurements.

donate_weights: False by default. True releases (frees the memory of) an
eager parameter or buffer whose every use, in every graph of the model kiln
compiled, was replaced by a folded constant (fp32 weights under
precision="fp16", a batch norm folded into a convolution), as soon as its
last fold is computed. A weight still read anywhere is kept: an unfolded use,
a fallback op, another compiled graph, another tensor or module sharing its
storage, or a reference from outside the model (an optimizer, a variable).
Afterwards the eager model raises an error naming the released weight, so
does a graph compiled later that reads it, and a released weight cannot be
updated or re-folded. The rules are in docs/memory.md."""

from __future__ import annotations

import dataclasses

_PRECISIONS = ("keep", "fp16", "bf16")
_FOLDS = ("auto", "none")
_NEW_ADDRESSES = ("choose", "update", "slots")


@dataclasses.dataclass(frozen=True)
class Options:
    device: str | None = None  # "cpu", "cuda" or None: where the example inputs live
    precision: str = "keep"  # "keep", "fp16", "bf16": run floating-point math in this precision
    cuda_graphs: bool = True  # replay whole executables as CUDA graphs (CUDA backend)
    # A call at addresses no kept graph has: "update" one, copy through "slots", or "choose" by cost
    # (src/runtime/executable.h)
    cuda_graph_new_addresses: str = "choose"
    fold: str = "auto"  # "auto": fold weight-only expressions where that pays; "none": never
    verbose: bool = False  # log the explain report and memory stages
    donate_weights: bool = False  # release eager weights whose every use was folded (docs/memory.md)

    @classmethod
    def from_user(cls, options=None, **more) -> "Options":
        merged = dict(options or {})
        merged.update(more)
        valid = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(merged) - set(valid))
        if unknown:
            raise ValueError(f"unknown kiln option(s) {', '.join(map(repr, unknown))}; valid options: {', '.join(valid)}")
        opts = cls(**merged)
        opts._validate()
        return opts

    def as_dict(self) -> dict:
        """The options as from_user takes them back."""
        return dataclasses.asdict(self)

    def _validate(self) -> None:
        if self.device is not None and self.device.split(":")[0] not in ("cpu", "cuda"):
            raise ValueError(f"kiln option device={self.device!r}: expected 'cpu', 'cuda', 'cuda:N' or None")
        if self.precision not in _PRECISIONS:
            raise ValueError(f"kiln option precision={self.precision!r}: expected one of {', '.join(_PRECISIONS)}")
        if self.fold not in _FOLDS:
            raise ValueError(f"kiln option fold={self.fold!r}: expected one of {', '.join(_FOLDS)}")
        if self.cuda_graph_new_addresses not in _NEW_ADDRESSES:
            raise ValueError(
                f"kiln option cuda_graph_new_addresses={self.cuda_graph_new_addresses!r}: "
                f"expected one of {', '.join(_NEW_ADDRESSES)}"
            )
        for flag in ("cuda_graphs", "verbose", "donate_weights"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"kiln option {flag}={getattr(self, flag)!r}: expected True or False")
