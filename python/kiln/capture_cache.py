"""The capture cache: Dynamo's graph to kiln's core-ATen graph, kept on disk, so that compiling the same
model again (a new process, the same torch and kiln) skips the ATen trace, 0.5-1.0 s of a first call for
the benchmark models on the dev CPU (docs/benchmarks.md).

An entry's key is a SHA-256 over everything the trace reads:
- Dynamo's graph: each node's kind, target and arguments. A target must be an ATen or prims op, or a
  function of torch, operator, math or builtins found again under its module and name; a graph calling
  anything else (a user's function, a custom op) is traced every time, never cached.
- each input's type, shape, strides, storage offset, dtype, device, requires_grad, conjugate and negative
  bits, whether it is a view or an inference tensor, and which earlier input shares its storage;
- torch's version, kiln's Python sources, the global state Dynamo guards (grad mode, autocast on each
  device, the default dtype, deterministic algorithms, ...), inference mode, the CPU's vector capability,
  and on CUDA the device's name and capability, torch's attention backend switches and whether cuDNN is
  on. Under a torch function or dispatch mode nothing is cached.
Only a graph kiln captured itself (kiln.aten_capture) is stored; aot_autograd's path is not cached.

Entries are JSON (kiln.graph_serial, never pickle), written to a temporary file and renamed into place; an
entry that does not read back is traced again and overwritten. KILN_CAPTURE_CACHE=0 turns the cache off;
KILN_CAPTURE_CACHE_DIR sets its folder (default: captures/ in $KILN_CACHE_DIR, else ~/.cache/kiln/captures).
It keeps the 512 most recently used entries."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import os
import pathlib
import sys
import tempfile

import torch
import torch.fx as fx

from kiln import graph_serial

log = logging.getLogger("kiln")

FORMAT = 1  # bump when an entry's meaning changes
MAX_ENTRIES = 512
_MODULES = ("torch", "operator", "_operator", "math", "builtins")


def capture(gm: fx.GraphModule, example_inputs, decompositions) -> tuple[fx.GraphModule | None, str]:
    """kiln.aten_capture.capture_inference_graph's result for `gm`, from the cache when it holds it."""
    from kiln.aten_capture import capture_inference_graph

    folder = cache_dir()
    key = graph_key(gm, example_inputs) if folder is not None else None
    if key is not None:
        hit = _load(folder / f"{key}.json")
        if hit is not None:
            return hit
    graph, why = capture_inference_graph(gm, example_inputs, decompositions)
    if key is not None and graph is not None:
        _store(folder, key, graph, why)
    return graph, why


def cache_dir() -> pathlib.Path | None:
    """The cache's folder, or None when KILN_CAPTURE_CACHE=0."""
    if os.environ.get("KILN_CAPTURE_CACHE", "1").strip().lower() in ("0", "off", "false", "no"):
        return None
    if os.environ.get("KILN_CAPTURE_CACHE_DIR"):
        return pathlib.Path(os.environ["KILN_CAPTURE_CACHE_DIR"])
    if os.environ.get("KILN_CACHE_DIR"):
        return pathlib.Path(os.environ["KILN_CACHE_DIR"]) / "captures"
    return pathlib.Path.home() / ".cache" / "kiln" / "captures"


def graph_key(gm: fx.GraphModule, example_inputs) -> str | None:
    """The cache key of capturing `gm` on `example_inputs`, or None when the capture cannot be cached."""
    try:
        if torch._C._len_torch_dispatch_stack() or torch._C._len_torch_function_stack():
            raise _Uncacheable("a torch function or dispatch mode is active")  # it may change what is traced
        parts = [_environment(), _graph_text(gm), _inputs_text(example_inputs)]
    except _Uncacheable as why:
        log.debug("kiln: capture not cached: %s", why)
        return None
    except Exception as error:  # noqa: BLE001 - the cache never fails a compile: the graph is traced
        log.debug("kiln: capture not cached: %s: %s", type(error).__name__, error)
        return None
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


class _Uncacheable(Exception):
    pass


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
    if isinstance(target, torch._ops.OpOverload):
        name = f"{target._schema.name}.{target._overloadname}"  # "aten::add.Tensor"
    elif isinstance(target, torch._ops.OpOverloadPacket):
        name = target._qualified_op_name  # "aten::add" (a packet's attributes are its overloads)
    else:
        name = None
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
    state = [f"format {FORMAT}", _versions(), f"inference mode {torch.is_inference_mode_enabled()}",
             f"cpu {torch.backends.cpu.get_cpu_capability()}", _global_state()]
    if torch.cuda.is_available():
        b = torch.backends.cuda
        state += [f"cuda {torch.cuda.get_device_name()} {torch.cuda.get_device_capability()}",
                  f"sdp {b.flash_sdp_enabled()} {b.mem_efficient_sdp_enabled()} {b.math_sdp_enabled()} "
                  f"{b.cudnn_sdp_enabled()} cudnn {torch.backends.cudnn.enabled}"]
    return "\n".join(state)


def _global_state() -> str:
    """The state Dynamo's own global guard checks (grad mode, autocast per device, default dtype, deterministic
    algorithms, ...), as its JSON where torch gives it: what Dynamo does not put in its graph, a trace reads."""
    guard = torch._C._dynamo.guards.GlobalStateGuard()
    if hasattr(guard, "__getstate__"):
        return guard.__getstate__()
    autocast = [(d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in ("cpu", "cuda")]
    return (f"grad {torch.is_grad_enabled()} dtype {torch.get_default_dtype()} autocast {autocast} "
            f"{torch.is_autocast_cache_enabled()} deterministic {torch.are_deterministic_algorithms_enabled()}")


@functools.cache
def _versions() -> str:
    """torch's version and a hash of kiln's Python sources (any edit to kiln starts a new cache)."""
    sources = hashlib.sha256()
    for path in sorted(pathlib.Path(__file__).parent.glob("*.py")):
        sources.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"torch {torch.__version__} {torch.version.git_version} kiln {sources.hexdigest()}"


def _load(path: pathlib.Path) -> tuple[fx.GraphModule, str] | None:
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        log.debug("kiln: capture cache entry %s unreadable: %s", path, error)
        return None
    try:
        if data.get("format") != FORMAT or not isinstance(data.get("capture"), str):
            raise ValueError("not an entry of this format")
        graph = graph_serial.from_data(data["graph"])
    except Exception as error:  # noqa: BLE001 - an entry that does not make a graph is traced again
        log.debug("kiln: capture cache entry %s unusable: %s: %s", path, type(error).__name__, error)
        return None
    try:
        os.utime(path)  # most recently used
    except OSError:
        pass
    return graph, f"{data['capture']}, from the capture cache"


def _store(folder: pathlib.Path, key: str, graph: fx.GraphModule, why: str) -> None:
    try:
        data = graph_serial.to_data(graph)
    except Exception as error:  # noqa: BLE001 - not cached; the compile goes on
        log.debug("kiln: capture not cached: %s: %s", type(error).__name__, error)
        return
    if data is None:
        log.debug("kiln: capture not cached: the captured graph has no data form")
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".tmp", delete=False) as f:
            temporary = pathlib.Path(f.name)
            try:
                json.dump({"format": FORMAT, "capture": why, "graph": data}, f)
            except BaseException:
                f.close()
                temporary.unlink(missing_ok=True)
                raise
        os.replace(temporary, folder / f"{key}.json")
        _prune(folder)
    except OSError as error:  # a read-only or full disk costs the next compile a trace, nothing more
        log.debug("kiln: capture cache not written: %s", error)


def _prune(folder: pathlib.Path) -> None:
    entries = list(folder.glob("*.json"))
    if len(entries) <= MAX_ENTRIES:
        return
    entries.sort(key=lambda p: p.stat().st_mtime)
    for path in entries[:len(entries) - MAX_ENTRIES]:
        path.unlink(missing_ok=True)

