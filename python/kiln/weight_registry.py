"""Weight identity across every graph kiln compiles (DESIGN.md Note [Weights]).

One process-wide registry, keyed weakly on storages, so every region of every
Dynamo graph of a model (graph breaks, recompiles) and every model sharing a
storage see the same facts:

- StorageRecord: one per storage kiln was handed as a weight. It names the
  tensors seen with it (weakly), the graphs that read it other than through a
  fold (with the reason), the folded constants computed from it, and whether
  donation released it.
- Shared folded constants: a fold is identified by its sources' storages (and
  offset, shape, strides), its expression and its result dtype; every region
  asking for the same one gets the same SharedConstant, so it is computed and
  held once however many graphs use it.

A graph's uses are dropped when its compiled module is freed. Nothing here
holds a strong reference to a user's tensor.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import weakref

import torch

_graph_ids = itertools.count()


def storage_id(t: torch.Tensor) -> int:
    """The identity of `t`'s storage (its StorageImpl address; valid while a tensor on it is alive)."""
    return t.untyped_storage()._cdata


_serials = itertools.count()


@dataclasses.dataclass(eq=False)
class StorageRecord:
    key: int
    serial: int = dataclasses.field(default_factory=lambda: next(_serials))  # unique even when an address is reused
    tensors: list = dataclasses.field(default_factory=list)  # weakrefs to the graph inputs seen on it
    names: dict = dataclasses.field(default_factory=dict)  # id(tensor) -> the model's name for it
    readers: dict = dataclasses.field(default_factory=dict)  # graph id -> why that graph reads it unfolded
    constants: weakref.WeakSet = dataclasses.field(default_factory=weakref.WeakSet)  # folds computed from it
    donated: bool = False

    def live_tensors(self) -> list[torch.Tensor]:
        out = []
        for ref in self.tensors:
            t = ref()
            if t is not None and t.untyped_storage()._cdata == self.key:
                out.append(t)
        return out

    def alive(self) -> bool:
        return bool(self.live_tensors())

    def name(self, t: torch.Tensor | None = None) -> str:
        if t is not None and id(t) in self.names:
            return self.names[id(t)]
        return ", ".join(sorted(set(self.names.values()))) or "<unnamed weight>"


class WeightRegistry:
    def __init__(self):
        self._records: dict[int, StorageRecord] = {}
        self._constants: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

    # --- storages -------------------------------------------------------

    def record(self, t: torch.Tensor, name: str | None = None) -> StorageRecord:
        """The record of `t`'s storage, created on first sight; `name` labels `t` in errors."""
        key = storage_id(t)
        rec = self._records.get(key)
        if rec is None or not rec.alive():
            rec = self._records[key] = StorageRecord(key)  # a new storage (or a dead one's address reused)
        if not any(ref() is t for ref in rec.tensors):
            rec.tensors.append(weakref.ref(t))
        if name is not None:
            rec.names[id(t)] = name
        return rec

    def find(self, t: torch.Tensor) -> StorageRecord | None:
        rec = self._records.get(storage_id(t))
        return rec if rec is not None and any(x is t for x in rec.live_tensors()) else None

    # --- graphs ---------------------------------------------------------

    def new_graph(self, owner) -> int:
        """An id for a compiled graph; its uses are forgotten when `owner` (its module) is freed."""
        gid = next(_graph_ids)
        weakref.finalize(owner, self._forget_graph, gid)
        return gid

    def add_reader(self, gid: int, t: torch.Tensor, name: str, why: str) -> None:
        self.record(t, name).readers[gid] = why

    def _forget_graph(self, gid: int) -> None:
        for key, rec in list(self._records.items()):
            rec.readers.pop(gid, None)
            if not rec.alive():
                del self._records[key]

    # --- folded constants -----------------------------------------------

    def constant(self, fold_graph, sources: list[torch.Tensor], factory):
        """The shared constant for `fold_graph` over `sources`: the existing one, or factory() registered."""
        records = [self.record(s) for s in sources]
        # The record's serial, not the storage's address: a freed storage's address may be reused.
        key = (canonical_text(fold_graph.text()),) + tuple(
            (rec.serial, s.storage_offset(), tuple(s.shape), tuple(s.stride()), s.dtype) for rec, s in zip(records, sources)
        )
        shared = self._constants.get(key)
        if shared is None:
            shared = factory()
            self._constants[key] = shared
        for rec in records:
            rec.constants.add(shared)
        return shared


_VALUE_NAME = re.compile(r"%[A-Za-z0-9_.]+")


def canonical_text(text: str) -> str:
    """The IR text with value names numbered by first appearance: one expression, one text."""
    names: dict[str, str] = {}
    return _VALUE_NAME.sub(lambda m: names.setdefault(m.group(0), f"%{len(names)}"), text)


REGISTRY = WeightRegistry()
