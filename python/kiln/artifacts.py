"""kiln.save and kiln.load: a compiled program as one file (Note [Artifact
format] in src/runtime/artifact_format.h), loaded back as a callable on torch
tensors without recompiling.

What can be saved: a program that is one kiln region and nothing else (no
torch fallback ops, outputs straight from the region), from kiln.compile, or
from torch.compile(backend="kiln") given example inputs (the model is traced
whole by torch.export and compiled by the same partitioner and pipeline).
What cannot, and why (kiln.artifacts.UnsupportedProgram says which applies):
  - torch fallback ops: they run in PyTorch, which a saved program (loaded by
    the C++ runtime, with no Python and no torch) does not have;
  - several kiln regions: they exist only around fallbacks (above);
  - graph breaks: the Python code Dynamo runs between graphs is not a graph
    and cannot be written; torch.export refuses such models and says where.
The weights are read where the program is bound to them (the model's own
tensors, or kiln's folded constants) and written once; kiln.load maps the file
and runs on the mapped weights without copying them. A file saved without
weights is re-bound at load from a state dict or a safetensors file.
"""

from __future__ import annotations

import operator

import torch

from kiln import _kiln
from kiln.executable import Executable
from kiln.output_buffers import OutputBuffers
from kiln.torch_types import KILN_TO_TORCH

kiln_error = _kiln.Error


class UnsupportedProgram(RuntimeError):
    """The program holds something kiln.save cannot write yet; the message says what."""


def _from_torch_compile(compiled, example_inputs, options):
    """The torch.compile(backend="kiln") model `compiled`, traced whole and compiled by kiln.compile."""
    import kiln

    if example_inputs is None:
        raise UnsupportedProgram(
            "kiln.save of a torch.compile(backend='kiln') model needs example_inputs=(...): Dynamo compiles it "
            "graph by graph at each new input signature, with Python glue in between that cannot be written, so "
            "kiln.save traces the model whole (torch.export) on the example inputs and saves that program")
    try:
        return kiln.compile(compiled._orig_mod, tuple(example_inputs), **(options or {}))
    except (kiln_error, UnsupportedProgram, TypeError, ValueError):
        raise
    except Exception as e:  # noqa: BLE001 - torch.export's many ways of refusing a model
        raise UnsupportedProgram(f"kiln.save: torch.export cannot trace the model as one graph (a graph break: "
                                 f"Python code between graphs cannot be saved): {type(e).__name__}: {e}") from e


def _is_input_check(node) -> bool:
    """torch.export's checks of an input's dtype and shape (no result used): a loaded program checks
    every input's dtype, shape and strides itself, so they need not be saved."""
    return (node.op == "call_function" and not node.users
            and node.target is torch.ops.aten._assert_tensor_metadata.default)


def save(compiled, path, weights: bool = True, example_inputs=None, options=None) -> None:
    from kiln.aot import CompiledProgram
    from kiln.region import KilnRegion

    if isinstance(compiled, torch._dynamo.eval_frame.OptimizedModule):
        compiled = _from_torch_compile(compiled, example_inputs, options)
    if not isinstance(compiled, CompiledProgram):
        raise UnsupportedProgram(
            f"kiln.save takes the program kiln.compile returns or a torch.compile(backend='kiln') model (with "
            f"example_inputs), got {type(compiled).__name__}")
    graph = compiled.module.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    regions = [n for n in graph.nodes if n.op == "call_module" and isinstance(compiled.module.get_submodule(n.target), KilnRegion)]
    others = [n for n in graph.nodes if n.op not in ("placeholder", "output") and n not in regions
              and not (n.op == "call_function" and n.target is operator.getitem) and not _is_input_check(n)]
    if others:
        what = ", ".join(f"{n.name} ({n.target})" for n in others[:5])
        raise UnsupportedProgram(f"kiln.save: the program runs {len(others)} op(s) in torch (fallback), e.g. {what}; "
                                 "only programs compiled entirely into one kiln region can be saved today")
    if len(regions) != 1:
        raise UnsupportedProgram(f"kiln.save: the program has {len(regions)} kiln regions; only one can be saved today")
    node = regions[0]
    region = compiled.module.get_submodule(node.target)
    n_weights = len(compiled.weight_sources)
    index = {ph: i for i, ph in enumerate(placeholders)}
    if not all(a in index for a in node.args):
        raise UnsupportedProgram("kiln.save: the kiln region reads values other than the program's inputs")
    user_args = [index[a] - n_weights for a, w in zip(node.args, region.arg_is_weight) if not w and index[a] >= n_weights]
    if user_args != list(range(len(placeholders) - n_weights)):
        raise UnsupportedProgram("kiln.save: the kiln region does not take the program's inputs in order")
    outputs = next(n for n in graph.nodes if n.op == "output").args[0]
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    n_out = len(region.output_specs)
    output_map = []  # program output j is the region's output output_map[j]
    for o in outputs:
        if o is node and n_out == 1:
            output_map.append(0)
        elif (isinstance(o, torch.fx.Node) and o.op == "call_function" and o.target is operator.getitem
              and o.args[0] is node and isinstance(o.args[1], int)):
            output_map.append(o.args[1])
        else:
            raise UnsupportedProgram(f"kiln.save: program output {len(output_map)} ({o}) is not an output of the "
                                     "kiln region (e.g. an input or a constant returned as is)")
    if not weights and region.folds is not None:
        raise UnsupportedProgram("kiln.save(weights=False): the program has folded constants (computed from the "
                                 "weights at compile time) that a loader could not re-create; save with weights, "
                                 "or compile with fold='none'")

    # Bind every weight the program reads (a program not yet called has none bound).
    names = getattr(compiled, "weight_names", None) or [None] * n_weights
    args = [compiled.weight_sources[index[a]]() if index[a] < n_weights else None for a in node.args]
    weight_names = {}
    for i, a in enumerate(node.args):
        key = region.weight_keys[i]
        if key is not None and index[a] < n_weights and names[index[a]] is not None:
            weight_names[key] = names[index[a]]
    if weights:
        with torch.no_grad():
            if region.folds is not None:
                region.folds.refresh(args, region.exe, region.device)
            for i, is_weight in enumerate(region.arg_is_weight):
                if is_weight and (args[i].data_ptr() != region.bound_ptrs[i] or args[i] is not region.bound_tensors[i]):
                    region.bind(i, args[i])
    metadata = {}  # the writer records the device and, for CUDA, its architecture (kiln.cuda_arch)
    try:
        import torch.utils._pytree as pytree

        metadata["kiln.out_spec"] = pytree.treespec_dumps(compiled.out_spec)
    except Exception:  # noqa: BLE001 - an output structure that cannot be written is returned flat
        pass
    # The file's graph returns the program's outputs (reordered, repeated or dropped from the region's).
    _kiln.save_artifact(region.exe._native, str(path), weights, weight_names, metadata, output_map)


class LoadedProgram:
    """A saved program loaded back: call it with torch tensors (CPU), get torch tensors."""

    def __init__(self, native, device):
        self._native = native
        self.device = device
        self.exe = Executable(native.executable())
        self.input_types = self.exe.input_types()
        self.output_buffers = OutputBuffers(
            [(tuple(shape), KILN_TO_TORCH[dtype]) for dtype, shape, _ in self.exe.output_types()], device)
        self.metadata = native.metadata()
        self.out_spec = None
        if "kiln.out_spec" in self.metadata:
            import torch.utils._pytree as pytree

            self.out_spec = pytree.treespec_loads(self.metadata["kiln.out_spec"])

    def weights(self):
        """(key, name, dtype, dims, strides, stored) for each weight the program reads."""
        return self._native.weights()

    def bind_weights(self, tensors: dict) -> None:
        missing = []
        for key, name, dtype, dims, strides, stored in self._native.weights():
            t = tensors.get(name, tensors.get(key))
            if t is None:
                if not stored:
                    missing.append(name)
                continue
            t = torch.as_tensor(t).detach().to(self.device)
            if t.dtype != KILN_TO_TORCH[dtype] or list(t.shape) != list(dims):
                raise ValueError(f"kiln.load: weight '{name}' is {t.dtype}{list(t.shape)}, the program needs "
                                 f"{KILN_TO_TORCH[dtype]}{list(dims)}")
            if list(t.stride()) != list(strides) and t.numel() > 1:
                t = torch.empty_strided(list(dims), list(strides), dtype=t.dtype, device=self.device).copy_(t)
            self.exe.bind_weight(key, t)
        if missing:
            raise ValueError(f"kiln.load: the file holds no data for {len(missing)} weight(s) and none was given: "
                             + ", ".join(missing[:10]))

    def __call__(self, *inputs):
        if len(inputs) != len(self.input_types):
            raise TypeError(f"kiln loaded program takes {len(self.input_types)} inputs, got {len(inputs)}")
        ins = []
        for t, (_, shape, strides) in zip(inputs, self.input_types):
            t = t.detach()
            if list(t.stride()) != list(strides) and list(t.shape) == list(shape) and t.numel() > 1:
                t = torch.empty_strided(t.shape, strides, dtype=t.dtype, device=t.device).copy_(t)
            ins.append(t)
        blocks, addresses = self.output_buffers.allocate()
        self.exe.run_into(ins, addresses)
        outs = self.output_buffers.outputs(blocks)
        if self.out_spec is not None:
            import torch.utils._pytree as pytree

            return pytree.tree_unflatten(outs, self.out_spec)
        return outs[0] if len(outs) == 1 else tuple(outs)


def _weights_from(weights, device) -> dict:
    """A dict of tensors from a state dict or the path of a safetensors file."""
    if isinstance(weights, (str, bytes)) or hasattr(weights, "__fspath__"):
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return load_file(weights, device=str(device))
        except (SafetensorError, OSError) as e:
            raise ValueError(f"kiln.load: cannot read weights from safetensors file '{weights}': {e}") from e
    return dict(weights)


def load(path, weights=None, device="cpu") -> LoadedProgram:
    """Loads a saved program onto `device`; `weights`: a state dict or a safetensors file path, for weights
    the file does not hold (or to replace those it does)."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", 0)
    native = _kiln.load_artifact(str(path), str(device))
    program = LoadedProgram(native, device)  # the native loader checked the GPU architecture
    program.bind_weights(_weights_from(weights, device) if weights is not None else {})
    return program