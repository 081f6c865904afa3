"""compile_graph: kiln Graph -> Executable (passes, memory plan, kernels).

The Executable takes tensors through DLPack (torch tensors, NumPy arrays):
weights are bound by pointer and must outlive the executable's use of them
(this wrapper keeps a reference), inputs are read in place, and outputs are
written into buffers the caller passes or that __call__ allocates."""

from __future__ import annotations

from kiln import _kiln


class Executable:
    def __init__(self, native):
        self._native = native
        self._weights = {}  # key -> the bound array/tensor, kept alive

    def bind_weight(self, key: str, tensor) -> None:
        self._native.bind_weight(key, tensor)
        self._weights[key] = tensor

    def run(self, inputs, outputs, stream: int = 0) -> None:
        """Runs with `inputs` (DLPack tensors) writing into `outputs` (contiguous, preallocated).
        On CUDA the work is enqueued on `stream` (a cudaStream_t as an int) and not waited for."""
        self._native.run(list(inputs), list(outputs), stream)

    def run_into(self, inputs, outputs, stream: int = 0) -> None:
        """run() with each output given by its address (an int): a contiguous buffer of output_types()[k] on
        this executable's device, allocated by the caller."""
        self._native.run_into(inputs, outputs, stream)

    def run_at(self, inputs, outputs, stream: int = 0) -> None:
        """run_into() with each input given by its address as well: the caller holds every input to
        input_types()[k] (dtype, shape, strides) on this executable's device; only the addresses are checked."""
        self._native.run_at(inputs, outputs, stream)

    def __call__(self, *inputs):
        """Convenience for NumPy: allocates the outputs as NumPy arrays and returns them."""
        import numpy as np

        outputs = [np.empty(shape, dtype=_NUMPY.get(dtype, dtype)) for dtype, shape, _ in self.output_types()]
        self.run(inputs, outputs)
        return outputs

    def input_types(self):
        return self._native.input_types()

    def output_types(self):
        return self._native.output_types()

    def weight_keys(self):
        return self._native.weight_keys()

    def arena_bytes(self) -> int:
        return self._native.arena_bytes()

    def arena_address(self) -> int:
        """Start of kiln's activation arena (0 before the first call or when none is needed)."""
        return self._native.arena_address()

    def literal_bytes(self) -> int:
        return self._native.literal_bytes()

    def bound_weights(self) -> dict:
        """key -> the address kiln reads that weight from (the caller's own storage)."""
        return self._native.bound_weights()

    def describe(self) -> str:
        return self._native.describe()

    def step_timings(self) -> list[tuple[str, str, float, float]]:
        """(node, kernel, lower_ms, first_run_ms) per kernel: the host time of lowering it and of its launch
        in the first call (where a generated CUDA kernel waits for its CUBIN and loads it); -1 before that."""
        return self._native.step_timings()

    def call_stats(self) -> dict:
        """calls, graph_captures, graph_updates, graph_replays, slot_calls and uncaptured_reason (CUDA graphs)."""
        return self._native.call_stats()


_NUMPY = {"f32": "float32", "f64": "float64", "f16": "float16", "i64": "int64", "i32": "int32", "i16": "int16",
          "i8": "int8", "u8": "uint8", "bool": "bool"}


def compile_graph(graph: _kiln.Graph, device: str = "cpu", optimize: bool = True, cuda_graphs: bool = True,
                  tf32_matmul: bool = False, tf32_conv: bool = False, new_addresses: str = "choose") -> Executable:
    """Compiles `graph` for `device` ("cpu", or "cuda[:N]" where the CUDA backend is built).

    On CUDA the executable's device memory (its arena and literals) comes from torch's caching
    allocator, so torch.cuda.memory_allocated() counts it, and with `cuda_graphs` its calls are
    replayed as CUDA graphs (src/runtime/executable.h says when and how; `new_addresses` is what a
    call at addresses no kept graph has does: "update" a graph, copy through static "slots", or
    "choose" by cost). `tf32_matmul` and
    `tf32_conv` let f32 matrix products and convolutions use TF32 tensor cores on CUDA (Note [Math
    modes] in src/runtime/math_options.h; torch_math() gives torch's current choice)."""
    allocator = torch_allocator(device) if device.startswith("cuda") else None
    return Executable(_kiln.compile(graph, device, optimize, allocator, cuda_graphs, tf32_matmul, tf32_conv,
                                    new_addresses))


def torch_math() -> dict:
    """torch's switches for TF32 as compile_graph's arguments: f32 matrix products follow
    torch.backends.cuda.matmul.allow_tf32 (torch.set_float32_matmul_precision sets it), f32
    convolutions torch.backends.cudnn.allow_tf32 (on by default in torch)."""
    import torch

    return {"tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
            "tf32_conv": bool(torch.backends.cudnn.allow_tf32 and torch.backends.cudnn.enabled)}


def torch_allocator(device: str):
    """An allocator callback for kiln: device memory as a torch uint8 tensor, which kiln keeps
    alive (and so torch counts as allocated) until it frees the memory. None without torch."""
    try:
        import torch
    except ImportError:
        return None
    from torch.utils._python_dispatch import _disable_current_modes

    dev = torch.device(device)

    def allocate(nbytes: int, alignment: int):
        # Real memory even while torch.compile traces with fake tensors (kiln
        # compiles inside AOTAutograd's compiler call, under its FakeTensorMode).
        with _disable_current_modes(), torch.inference_mode():
            t = torch.empty(nbytes, dtype=torch.uint8, device=dev)
            if t.data_ptr() % alignment:  # torch's blocks are 512-byte aligned; pad only if not
                t = torch.empty(nbytes + alignment, dtype=torch.uint8, device=dev)
        return -(-t.data_ptr() // alignment) * alignment, t

    return allocate
