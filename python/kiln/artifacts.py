"""kiln.save and kiln.load: a compiled program as one file (Note [Artifact
format] in src/runtime/artifact_format.h), loaded back as a callable on torch
tensors without recompiling.

What can be saved today: a program from kiln.compile that is one kiln region
and nothing else (no torch fallback ops, outputs straight from the region).
Anything else raises kiln.artifacts.UnsupportedProgram saying what is in the
way. The weights are read where the program is bound to them (the model's own
tensors, or kiln's folded constants) and written once; kiln.load maps the file
and runs on the mapped weights without copying them.
"""

from __future__ import annotations

import operator

import torch

from kiln import _kiln
from kiln.executable import Executable
from kiln.torch_types import KILN_TO_TORCH

kiln_error = _kiln.Error


class UnsupportedProgram(RuntimeError):
    """The program holds something kiln.save cannot write yet; the message says what."""


def save(compiled, path, weights: bool = True) -> None:
    from kiln.aot import CompiledProgram
    from kiln.region import KilnRegion

    if not isinstance(compiled, CompiledProgram):
        raise UnsupportedProgram(
            f"kiln.save takes the program kiln.compile returns, got {type(compiled).__name__}; programs from "
            "torch.compile(backend='kiln') cannot be saved yet (they may span several graphs and torch fallbacks)"
        )
    graph = compiled.module.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    regions = [n for n in graph.nodes if n.op == "call_module" and isinstance(compiled.module.get_submodule(n.target), KilnRegion)]
    others = [n for n in graph.nodes if n.op not in ("placeholder", "output") and n not in regions
              and not (n.op == "call_function" and n.target is operator.getitem)]
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
    metadata = {"kiln.output_map": ",".join(map(str, output_map))}
    try:
        import torch.utils._pytree as pytree

        metadata["kiln.out_spec"] = pytree.treespec_dumps(compiled.out_spec)
    except Exception:  # noqa: BLE001 - an output structure that cannot be written is returned flat
        pass
    _kiln.save_artifact(region.exe._native, str(path), weights, weight_names, metadata)


class LoadedProgram:
    """A saved program loaded back: call it with torch tensors (CPU), get torch tensors."""

    def __init__(self, native):
        self._native = native
        self.exe = Executable(native.executable())
        self.input_types = self.exe.input_types()
        self.output_specs = [(tuple(shape), KILN_TO_TORCH[dtype]) for dtype, shape, _ in self.exe.output_types()]
        self.metadata = native.metadata()
        self.out_spec = None
        n_out = len(self.output_specs)
        text = self.metadata.get("kiln.output_map", "")
        self.output_map = [int(k) for k in text.split(",")] if text else list(range(n_out))
        if any(k < 0 or k >= n_out for k in self.output_map):
            raise kiln_error(f"kiln.load: the file's output map {text!r} does not fit the program's {n_out} outputs")
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
            t = torch.as_tensor(t).detach()
            if t.dtype != KILN_TO_TORCH[dtype] or list(t.shape) != list(dims):
                raise ValueError(f"kiln.load: weight '{name}' is {t.dtype}{list(t.shape)}, the program needs "
                                 f"{KILN_TO_TORCH[dtype]}{list(dims)}")
            if list(t.stride()) != list(strides) and t.numel() > 1:
                t = torch.empty_strided(list(dims), list(strides), dtype=t.dtype).copy_(t)
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
                t = torch.empty_strided(t.shape, strides, dtype=t.dtype).copy_(t)
            ins.append(t)
        outs = [torch.empty(shape, dtype=dtype) for shape, dtype in self.output_specs]
        self.exe.run(ins, outs)
        outs = [outs[k] for k in self.output_map]
        if self.out_spec is not None:
            import torch.utils._pytree as pytree

            return pytree.tree_unflatten(outs, self.out_spec)
        return outs[0] if len(outs) == 1 else tuple(outs)


def load(path, weights=None) -> LoadedProgram:
    native = _kiln.load_artifact(str(path))
    program = LoadedProgram(native)
    if weights is not None:
        if isinstance(weights, (str, bytes)) or hasattr(weights, "__fspath__"):
            raise TypeError("kiln.load: weights from a safetensors file are not supported yet; pass a dict of tensors")
        program.bind_weights(dict(weights))
    else:
        program.bind_weights({})
    return program
