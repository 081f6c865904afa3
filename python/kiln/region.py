"""A compiled kiln region as a torch module: binds weights by pointer (and
re-binds only when a parameter's storage moved), re-folds folded constants
whose sources changed (kiln.folding), passes inputs through DLPack, and
allocates outputs as torch tensors that kiln writes into (passed by address)."""

from __future__ import annotations

import operator

import torch

from kiln.executable import Executable
from kiln.fx_import import contiguous_strides
from kiln.folding import RegionFolds
from kiln.output_buffers import OutputBuffers
from kiln.torch_types import KILN_TO_TORCH


def _stream_of_current_stream(index: int) -> int:
    return torch.cuda.current_stream(index).cuda_stream


# The caller's current cudaStream_t on a device index, as an int: torch's raw accessor where it has
# one (no Stream object built on every call), else through torch.cuda.current_stream.
_current_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", _stream_of_current_stream)


_DATA_PTR = torch.Tensor.data_ptr


def items_getter(indices: list[int]):
    """args -> the tuple of args[i] for i in indices, in C (operator.itemgetter)."""
    if not indices:
        return lambda args: ()
    getter = operator.itemgetter(*indices)
    return (lambda args: (getter(args),)) if len(indices) == 1 else getter  # one index gives the item itself


class KilnRegion(torch.nn.Module):
    def __init__(self, exe: Executable, arg_is_weight: list[bool], weight_keys: list[str | None], device: torch.device,
                 folds=(), trace=None, name: str = "region"):
        super().__init__()
        self.exe = exe
        self.device = device
        self._cuda_index = (device.index or 0) if device.type == "cuda" else None  # None off CUDA
        self.name = name
        self.trace = trace  # memory_trace.MemoryTrace: the fold and first-run stages are recorded there
        self.first_call = True
        arg_of_key = {k: i for i, k in enumerate(weight_keys) if k is not None}
        self.folds = RegionFolds(list(folds), arg_of_key) if folds else None
        # Weights the optimized program no longer reads (dead code) are not bound.
        live = set(exe.weight_keys())
        self.weight_keys = weight_keys
        self.arg_is_weight = [w and k in live for w, k in zip(arg_is_weight, weight_keys)]
        self.arg_is_dead = [w and k not in live for w, k in zip(arg_is_weight, weight_keys)]
        self.weight_args = [i for i, w in enumerate(self.arg_is_weight) if w]
        # The bound weights' data pointers as of the last call: one comparison per call in the common
        # case instead of a Python-level check per weight (BERT-base binds about 200).
        self._weights_of = items_getter(self.weight_args)
        self._last_weights: list | None = None
        self.input_args = [i for i, w in enumerate(arg_is_weight) if not w]
        self.bound_ptrs: list[int | None] = [None] * len(arg_is_weight)
        # Holds every bound weight so its storage lives as long as kiln reads it.
        self.bound_tensors: list[torch.Tensor | None] = [None] * len(arg_is_weight)
        self.input_types = [(dtype, shape, tuple(strides)) for dtype, shape, strides in exe.input_types()]
        # What an input must be to go to the executable by its address alone (Executable.run_at).
        self.input_checks = [(KILN_TO_TORCH[dtype], tuple(shape), strides) for dtype, shape, strides in self.input_types]
        self._input_device = torch.device(device.type, self._cuda_index) if self._cuda_index is not None else device
        self.output_specs = [
            (tuple(shape), KILN_TO_TORCH[dtype]) for dtype, shape, _ in exe.output_types()
        ]
        self.output_buffers = OutputBuffers(self.output_specs, device)

    def bind(self, index: int, tensor: torch.Tensor) -> None:
        self.exe.bind_weight(self.weight_keys[index], tensor.detach())
        self.bound_ptrs[index] = tensor.data_ptr()
        self.bound_tensors[index] = tensor

    def kiln_bytes(self) -> int:
        """Bytes kiln owns for this region: its activation arena and its folded constants."""
        return self.exe.arena_bytes() + (self.folds.nbytes if self.folds else 0)

    def forward(self, *args):
        if self.first_call and self.trace is not None and self.trace.stage("called") is None:
            self.trace.record("called", self.kiln_bytes())  # torch's time from kiln's return to the first call
        # On CUDA, kiln runs on the caller's current stream and never synchronizes.
        stream = _current_raw_stream(self._cuda_index) if self._cuda_index is not None else 0
        folds = self.folds
        # Once every constant is folded, a CUDA call checks their sources after its launch, while the device
        # runs it (ResNet-50's 265 sources: tens of microseconds of host time the device would wait for).
        check_after = folds is not None and folds.complete and self._cuda_index is not None
        if folds is not None and not check_after:
            folds.refresh(args, self.exe, self.device, stream)
            if self.first_call and self.trace is not None:
                self.trace.record("fold", self.kiln_bytes())
        weights = self._weights_of(args)
        # Data pointers alone: while kiln holds a bound tensor its storage cannot be freed, so an equal
        # pointer is the same storage even when the tensor object is another (Dynamo guards dtype and shape).
        # Checked before the launch: a weight's old storage may be gone.
        snapshot = list(map(_DATA_PTR, weights))
        if snapshot != self._last_weights:
            bound = self.bound_tensors
            for i in self.weight_args:
                arg = args[i]
                if arg is not bound[i] or arg.data_ptr() != self.bound_ptrs[i]:
                    self.bind(i, arg)
            self._last_weights = snapshot
        inputs = [self._as_expected(args[i], k) for k, i in enumerate(self.input_args)]
        at = self._input_addresses(inputs)
        buffers = self.output_buffers
        blocks, addresses = buffers.take(stream)
        self._launch(inputs, at, addresses, stream)
        if check_after and folds.refresh(args, self.exe, self.device, stream):
            # A source changed since the last call, so the launch above read old constants (kiln-owned
            # buffers, still valid). They were re-folded after it on the same stream; running again
            # overwrites the outputs before anything later on the stream can read them.
            self._launch(inputs, at, addresses, stream)
        buffers.prepare_next(stream)
        outputs = buffers.outputs(blocks)
        if self.first_call:
            self.first_call = False
            if self.trace is not None:
                self.trace.record("first run", self.kiln_bytes())
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _launch(self, inputs: list, at: list | None, addresses: list[int], stream: int) -> None:
        if at is None:
            self.exe.run_into(inputs, addresses, stream)  # through DLPack: its checks name what differs
        else:
            self.exe.run_at(at, addresses, stream)  # kiln described these outputs and checked these inputs

    def _input_addresses(self, inputs: list) -> list[int] | None:
        """Each input's address when every input has the dtype, shape, strides and device the executable was
        planned for, else None (DLPack's path then checks them and names what differs)."""
        addresses = []
        for t, (dtype, shape, strides) in zip(inputs, self.input_checks):
            if t.dtype is not dtype or t.shape != shape or t.stride() != strides or t.device != self._input_device:
                return None
            addresses.append(t.data_ptr())
        return addresses

    def _as_expected(self, t: torch.Tensor, index: int) -> torch.Tensor:
        _, shape, strides = self.input_types[index]
        if t.requires_grad:  # DLPack exports no tensor that requires grad
            t = t.detach()
        if t.stride() != strides and list(t.shape) == list(shape) and t.numel() > 1:
            # Same values in the layout the executable was planned for (an activation, never a weight).
            if list(strides) == contiguous_strides(shape):
                return t.contiguous()
            fixed = torch.empty_strided(t.shape, strides, dtype=t.dtype, device=t.device)
            fixed.copy_(t)
            return fixed
        return t
