"""kiln's entry in torch's caching precompile (torch._dynamo.config.caching_precompile, or
TORCH_CACHING_PRECOMPILE=1; experimental in torch). With it on, torch.compiler.save_cache_artifacts()
saves Dynamo's bytecode and guards for each compiled function, plus each backend's artifact, and a later
process's torch.compile of the same code loads them instead of tracing again. Dynamo's tracing is most of
a warm first call (docs/benchmarks.md), so this is the one way to skip it.

kiln's artifact is the captured core-ATen graph (kiln.graph_serial's JSON, as in kiln.capture_cache),
which inputs are weights and their names, the device and kiln's options: never a weight's value. The
loading process compiles that graph on its first call, with the weights it is called with, so the
weight registry, folds and donation work as after a trace. A graph kiln did not capture itself (the
aot_autograd path) records no artifact, and torch then bypasses that entry (it traces as usual).
An artifact saved by another torch or kiln (kiln.capture_key's stamp) is still compiled: its graph is
the model's. One of another format raises RuntimeError at the load; torch logs "Failed to load entry
from dynamo cache", and in torch 2.14.1 its fallback then stops with "CompilePackage is already
initialized" (torch's, not kiln's: delete the cache folder)."""

from __future__ import annotations

import json
import logging
import threading

import torch
from torch._dynamo.precompile_context import BackendCacheArtifact, PrecompileContext

from kiln import graph_serial
from kiln.capture_key import _versions as versions
from kiln.options import Options

log = logging.getLogger("kiln")

FORMAT = "kiln-precompile-1"


def record(gm: torch.fx.GraphModule, aten: torch.fx.GraphModule, capture: str, weight_flags: list[bool],
           weight_names: list[str], device: torch.device, options: Options) -> None:
    """Records kiln's artifact for Dynamo graph `gm` (compiled from `aten`); kiln.dynamo_backend calls it when the
    caching precompile is on."""
    key = getattr(gm, "_backend_id", None)
    if key is None:
        return
    try:
        data = graph_serial.to_data(aten)
    except Exception as error:  # noqa: BLE001 - no artifact: torch bypasses the entry and traces next time
        log.debug("kiln: no precompile artifact for %s: %s: %s", key, type(error).__name__, error)
        return
    if data is None:
        log.debug("kiln: no precompile artifact for %s: the captured graph has no data form", key)
        return
    payload = {"format": FORMAT, "versions": versions(), "graph": data, "capture": capture, "weights": weight_flags,
               "names": weight_names, "device": str(device), "options": options.as_dict()}
    PrecompileContext.record_artifact(KilnCacheArtifact(key=key, content=json.dumps(payload)))


class KilnCacheArtifact(BackendCacheArtifact):
    """What torch's precompile cache keeps for one kiln-compiled graph (the payload's JSON text)."""

    def after_deserialization(self):
        payload = json.loads(self.content)
        if payload.get("format") != FORMAT:
            raise RuntimeError(f"kiln precompile artifact of format {payload.get('format')!r}, expected {FORMAT!r}")
        if payload.get("versions") != versions():
            # Still the model's core-ATen graph, which this kiln compiles as it would a fresh capture. Refusing it
            # would not make torch trace again: torch 2.14.1's fallback then stops ("CompilePackage is already
            # initialized"), so a cache from before a kiln upgrade would stop the user's program.
            log.info("kiln: precompile artifact saved by %r, compiled by %r", payload.get("versions"), versions())
        graph = graph_serial.from_data(payload["graph"])  # a graph that does not read back fails here, at the load
        return PrecompiledGraph(payload, graph)


class PrecompiledGraph:
    """The compiled function torch installs for a loaded artifact: compiles on the first call, then runs."""

    def __init__(self, payload: dict, graph: torch.fx.GraphModule) -> None:
        self._payload = payload
        self._graph = graph  # the captured graph: compiled on the first call, run in torch before for autograd
        self._compiled = None
        self._lock = threading.Lock()  # two threads' first calls compile once

    def __call__(self, *args):
        if self._compiled is None:
            if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
                from kiln.dynamo_backend import warn_grad

                warn_grad()  # as a trace would: inference only, so this call runs the graph in torch
                return self._graph(*args)
            with self._lock:
                if self._compiled is None:
                    self._compiled = self._compile(args)
        return self._compiled(*args)

    def _compile(self, args):
        from kiln.dynamo_backend import compile_aten, weight_refs

        p = self._payload
        flags = p["weights"]
        if len(flags) != len(args):
            raise RuntimeError(f"kiln precompile artifact expects {len(flags)} inputs, the call passed {len(args)}")
        options = Options.from_user(p["options"])
        return compile_aten(self._graph, weight_flags=flags, device=torch.device(p["device"]), options=options,
                            reports=None, weight_refs=weight_refs(args, flags, p["names"]),
                            capture=f"{p['capture']}, from torch's precompile cache")
