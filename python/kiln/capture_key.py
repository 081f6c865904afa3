"""The capture cache's key (kiln.capture_cache): a SHA-256 over everything kiln's ATen trace of a Dynamo
graph reads, so that two compiles with one key trace the same graph.

- Dynamo's graph: each node's kind, target and arguments. A target must be an ATen or prims op, or a
  function of torch, operator, math or builtins found again under its module and name; a graph calling
  anything else (a user's function, a custom op) has no key and is traced every time.
- each input's type, shape, strides, storage offset, dtype, device, requires_grad, conjugate and negative
  bits, whether it is a view or an inference tensor, and which earlier input shares its storage;
- torch's version, kiln's Python sources, the global state Dynamo guards (grad mode, autocast on each
  device, the default dtype, deterministic algorithms, ...), inference mode, the CPU's vector capability;
- the backend switches that decompositions and op choices read while tracing: the attention (SDPA)
  backends, their priority order and the math path's reduced-precision reductions (on the CPU too), mkldnn
  (torch's LSTM decomposition), opt_einsum (einsum's contraction order) and cuDNN;
- when the graph uses CUDA: each CUDA device's name and capability (the inputs' and the current one) and
  cuDNN's version. A CPU compile does not start CUDA for its key.
An adversarial review (session 18) found the switches and autocast; each has a test in
tests/python/test_capture_cache.py that changes it and expects another key."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import pathlib
import sys

import torch
import torch.fx as fx

from kiln.torch_types import op_name

log = logging.getLogger("kiln")

FORMAT = 1  # bump when an entry's meaning changes
_MODULES = ("torch", "operator", "_operator", "math", "builtins")


class _Uncacheable(Exception):
    pass


def graph_key(gm: fx.GraphModule, example_inputs) -> str | None:
    """The cache key of capturing `gm` on `example_inputs`, or None when the capture cannot be cached."""
    try:
        graph = _graph_text(gm)
        inputs = _inputs_text(example_inputs)
        cuda = "cuda" in graph or any(t.is_cuda for t in example_inputs)
        parts = [_environment(), _cuda_state(example_inputs) if cuda else "no cuda", graph, inputs]
    except _Uncacheable as why:
        log.debug("kiln: capture not cached: %s", why)
        return None
    except Exception as error:  # noqa: BLE001 - the cache never fails a compile: the graph is traced
        log.debug("kiln: capture not cached: %s: %s", type(error).__name__, error)
        return None
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _graph_text(gm: fx.GraphModule) -> str:
    index: dict[fx.Node, int] = {}
    lines = []
    for node in gm.graph.nodes:
        if node.op not in ("placeholder", "call_function", "call_method", "output"):
            raise _Uncacheable(f"{node.op} node {node.name}")
        index[node] = len(index)
        target = _target_text(node.target) if node.op == "call_function" else \
            (node.target if node.op == "call_method" else "")
        lines.append(f"{node.op} {target} {_arg_text(node.args, index)} {_arg_text(node.kwargs, index)}")
    return "\n".join(lines)


def _target_text(target) -> str:
    name = op_name(target)
    if name is not None:
        if name.split("::")[0] not in ("aten", "prims"):
            raise _Uncacheable(f"op {name}")
        return f"op {name}"
    module, name = getattr(target, "__module__", None), getattr(target, "__name__", None)
    if not isinstance(module, str) or not isinstance(name, str) or module.split(".")[0] not in _MODULES:
        raise _Uncacheable(f"call of {target!r}")
    # The function must be what its module holds under its name (not a local of the same name).
    if getattr(sys.modules.get(module), name, None) is not target:
        raise _Uncacheable(f"call of {module}.{name}, which that module does not hold")
    return f"{module}.{name}"


def _arg_text(a, index: dict) -> str:
    if isinstance(a, fx.Node):
        return f"%{index[a]}"
    if a is None or type(a) in (bool, int, str):
        return repr(a)
    if type(a) is float:
        return a.hex() if math.isfinite(a) else repr(a)
    if isinstance(a, (list, tuple)):  # FX's immutable list, torch.Size
        return f"{type(a).__name__}[{', '.join(_arg_text(x, index) for x in a)}]"
    if isinstance(a, dict):
        return "{" + ", ".join(f"{k!r}: {_arg_text(v, index)}" for k, v in a.items()) + "}"
    if type(a) is slice:
        return f"slice({_arg_text(a.start, index)}, {_arg_text(a.stop, index)}, {_arg_text(a.step, index)})"
    if a is Ellipsis:
        return "..."
    if isinstance(a, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return f"{type(a).__name__}({a})"
    raise _Uncacheable(f"argument of type {type(a).__name__}")


def _inputs_text(example_inputs) -> str:
    storages: dict[int, int] = {}
    lines = []
    for k, t in enumerate(example_inputs):
        if type(t) not in (torch.Tensor, torch.nn.Parameter):
            raise _Uncacheable(f"input {k} is a {type(t).__name__}")
        shares = storages.setdefault(t.untyped_storage()._cdata, k)
        lines.append(f"{type(t).__name__} {tuple(t.shape)} {t.stride()} {t.storage_offset()} {t.dtype} {t.device} "
                     f"{t.requires_grad} {t.is_conj()} {t.is_neg()} {t._is_view()} {t.is_inference()} {shares}")
    return "\n".join(lines)


def _environment() -> str:
    return "\n".join([f"format {FORMAT}", _versions(), f"inference mode {torch.is_inference_mode_enabled()}",
                      f"cpu {torch.backends.cpu.get_cpu_capability()}", _global_state(), _switches()])


def _global_state() -> str:
    """The state Dynamo's own global guard checks (grad mode, autocast per device, default dtype, deterministic
    algorithms, ...), from its JSON where torch gives it: what Dynamo does not put in its graph, a trace reads.
    Less the thread count, which no trace reads."""
    guard = torch._C._dynamo.guards.GlobalStateGuard()
    if hasattr(guard, "__getstate__"):
        state = json.loads(guard.__getstate__())
        state.pop("num_threads", None)
        return json.dumps(state, sort_keys=True)
    autocast = [(d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in ("cpu", "cuda")]
    return (f"grad {torch.is_grad_enabled()} dtype {torch.get_default_dtype()} autocast {autocast} "
            f"{torch.is_autocast_cache_enabled()} deterministic {torch.are_deterministic_algorithms_enabled()}")


def _switches() -> str:
    b = torch.backends
    sdp = [b.cuda.flash_sdp_enabled(), b.cuda.mem_efficient_sdp_enabled(), b.cuda.math_sdp_enabled(),
           b.cuda.cudnn_sdp_enabled(), _optional(b.cuda, "fp16_bf16_reduction_math_sdp_allowed"),
           _optional(torch._C, "_get_sdp_priority_order")]
    einsum = [b.opt_einsum.is_available(), b.opt_einsum.enabled, b.opt_einsum.strategy]
    return f"sdp {sdp} mkldnn {torch._C._get_mkldnn_enabled()} opt_einsum {einsum} cudnn {b.cudnn.enabled}"


def _optional(owner, name: str):
    """owner.name() where this torch has it (the GPU machine's torch may be older than the dev one)."""
    fn = getattr(owner, name, None)
    return fn() if fn is not None else "absent"


def _cuda_state(example_inputs) -> str:
    if not torch.cuda.is_available():
        return "cuda unavailable"
    devices = sorted({t.device.index or 0 for t in example_inputs if t.is_cuda} | {torch.cuda.current_device()})
    names = [f"cuda:{d} {torch.cuda.get_device_name(d)} {torch.cuda.get_device_capability(d)}" for d in devices]
    return f"{' '.join(names)} current {torch.cuda.current_device()} cudnn {torch.backends.cudnn.version()}"


@functools.cache
def _versions() -> str:
    """torch's version and a hash of kiln's Python sources (any edit to kiln starts a new cache)."""
    sources = hashlib.sha256()
    for path in sorted(pathlib.Path(__file__).parent.glob("*.py")):
        sources.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"torch {torch.__version__} {torch.version.git_version} kiln {sources.hexdigest()}"
