"""The capture cache: Dynamo's graph to kiln's core-ATen graph, kept on disk, so that compiling the same
model again (a new process, the same torch and kiln) skips the ATen trace, 0.5-1.0 s of a first call for
the benchmark models on the dev CPU (docs/benchmarks.md).

An entry is found by kiln.capture_key's SHA-256 of everything the trace reads. It holds the graph kiln
captured itself (kiln.aten_capture, with kiln's decomposition table), or that the graph needs aot_autograd
(an input written in place, as a static key/value cache is) and why: the next compile goes straight to
aot_autograd instead of tracing once for nothing first. aot_autograd's own graphs are not cached.

Entries are JSON (kiln.graph_serial, never pickle), written to a temporary file and renamed into place. An
entry that does not read back, or whose outputs' shapes, dtypes and devices are not the ones Dynamo
recorded, is traced again and overwritten; no failure of the cache fails a compile. KILN_CAPTURE_CACHE=0
turns the cache off; KILN_CAPTURE_CACHE_DIR sets its folder (default: captures/ in $KILN_CACHE_DIR, else
~/.cache/kiln/captures). It keeps the 512 most recently used entries."""

from __future__ import annotations

import json
import logging
import os
import pathlib
import tempfile

import torch.fx as fx

from kiln import graph_serial
from kiln.capture_key import FORMAT, graph_key
from kiln.decompositions import decomposition_table

log = logging.getLogger("kiln")

MAX_ENTRIES = 512


def capture(gm: fx.GraphModule, example_inputs) -> tuple[fx.GraphModule | None, str]:
    """kiln.aten_capture.capture_inference_graph's result for `gm` with kiln's decomposition table, from the
    cache when it holds it."""
    from kiln.aten_capture import capture_inference_graph

    folder = cache_dir()
    key = graph_key(gm, example_inputs) if folder is not None else None
    if key is not None:
        hit = _load(folder / f"{key}.json")
        # A graph kiln cannot capture itself goes to aot_autograd, which takes any graph: that answer needs no check.
        if hit is not None and (hit[0] is None or _outputs_agree(gm, hit[0])):
            log.debug("kiln: capture read from the cache (%s)", key)
            return hit
    graph, why = capture_inference_graph(gm, example_inputs, decomposition_table())
    if key is not None:
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


def _load(path: pathlib.Path) -> tuple[fx.GraphModule, str] | None:
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except Exception as error:  # noqa: BLE001 - unreadable (a deep nesting raises RecursionError): traced again
        log.debug("kiln: capture cache entry %s unreadable: %s: %s", path, type(error).__name__, error)
        return None
    try:
        if data.get("format") != FORMAT or not isinstance(data.get("capture"), str):
            raise ValueError("not an entry of this format")
        graph = None if data["graph"] is None else graph_serial.from_data(data["graph"])
    except Exception as error:  # noqa: BLE001 - an entry that does not make a graph is traced again
        log.debug("kiln: capture cache entry %s unusable: %s: %s", path, type(error).__name__, error)
        return None
    try:
        os.utime(path)  # most recently used
    except OSError:
        pass
    return graph, f"{data['capture']}, from the capture cache"


def _outputs_agree(gm: fx.GraphModule, graph: fx.GraphModule) -> bool:
    """A last check of a hit against what Dynamo recorded: each output's shape, dtype and device. A state the
    key missed that changes them (as autocast would have) gives a trace instead of a wrong graph."""
    def types(module, meta):
        out = next(n for n in reversed(module.graph.nodes) if n.op == "output").args[0]
        values = [a.meta.get(meta) if isinstance(a, fx.Node) else a for a in (out if isinstance(out, (list, tuple))
                                                                               else [out])]
        return [(tuple(v.shape), v.dtype, v.device) if hasattr(v, "dtype") else None for v in values]

    recorded, cached = types(gm, "example_value"), types(graph, "val")
    agree = len(recorded) == len(cached) and all(r is None or r == c for r, c in zip(recorded, cached))
    if not agree:
        log.warning("kiln: a capture cache entry's outputs (%s) differ from Dynamo's (%s); traced again. Please "
                    "report this: the cache key misses something the trace reads.", cached, recorded)
    return agree


def _store(folder: pathlib.Path, key: str, graph: fx.GraphModule | None, why: str) -> None:
    """Writes `graph` (None: the graph needs aot_autograd, and `why`) as the entry of `key`."""
    try:
        data = None if graph is None else graph_serial.to_data(graph)
    except Exception as error:  # noqa: BLE001 - not cached; the compile goes on
        log.debug("kiln: capture not cached: %s: %s", type(error).__name__, error)
        return
    if data is None and graph is not None:
        log.debug("kiln: capture not cached: the captured graph has no data form")
        return
    text = json.dumps({"format": FORMAT, "capture": why, "graph": data})
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, suffix=".tmp")
        try:
            with os.fdopen(handle, "w") as f:
                f.write(text)
            os.replace(temporary, folder / f"{key}.json")
        finally:
            pathlib.Path(temporary).unlink(missing_ok=True)  # left only when the write failed
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

