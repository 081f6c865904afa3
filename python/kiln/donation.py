"""Donation (donate_weights=True): releasing eager weights whose every use was folded.

After each fold completes, each of its sources is released when nothing can
read it any more (docs/memory.md, "Donation"):

- every graph kiln compiled reads it only through folded constants, all of
  them computed (the weight registry's readers and constants);
- no other tensor shares its storage (a view, an alias, another module's
  parameter kiln was not handed): the storage's use count is exactly the
  tensors kiln knows plus the Python storage object asked for here;
- nothing outside the model holds the tensor: every Python container holding
  it is a module's _parameters/_buffers or the arguments of the running call
  (an optimizer's list, a dict, an object attribute, a closure keep it).

Release empties the storage in place (untyped_storage().resize_(0)): the
tensor keeps its shape, dtype and strides, so Dynamo's guards still hold and
the compiled graphs run on without a recompile, and the memory goes back to
the allocator at once. The owning modules get a forward pre-hook and a
load_state_dict pre-hook that raise ReleasedWeightError naming the weight, so
the eager model fails clearly instead of reading freed memory. A tensor used
directly (not through its module) has no such guard: do not touch released
weights outside their modules.
"""

from __future__ import annotations

import collections.abc
import functools
import gc
import os
import sys
import types
import weakref

import torch

from kiln.folding import ReleasedWeightError, released
from kiln.weight_registry import WeightRegistry

_guarded: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # module -> its guard hooks' handles

# What may hold a weight on the way from the caller to kiln: call arguments, the
# closures, bound methods and iterators the call chain builds around them.
_PASS_THROUGH = (tuple, list, dict, types.CellType, types.FunctionType, types.MethodType, functools.partial,
                 collections.abc.Iterator)
_DEPTH = 4


class Donor:
    """Releases one region's fold sources as their folds complete. begin() looks for holders outside
    the model for all the region's candidates in one walk of the heap (gc); after_fold() releases."""

    def __init__(self, registry: WeightRegistry):
        self.registry = registry
        self.outside: dict[int, str] = {}  # id(tensor) -> why it is held outside the model
        self.owners: dict[int, list] = {}  # id(tensor) -> [(module, attribute)]

    def begin(self, candidates: list[torch.Tensor]) -> None:
        unique = {id(t): t for t in candidates if not released(t) and self._storage_reason(t) is None}
        tensors = [x for t in unique.values() for x in self.registry.find(t).live_tensors()]
        self.outside, self.owners = _walk(list({id(x): x for x in tensors}.values()))

    def after_fold(self, sources: list[torch.Tensor]) -> None:
        for t in sources:
            rec = self.registry.find(t)
            if rec is None or rec.donated or released(t) or self.keep_reason(t) is not None:
                continue
            rec.donated = True
            tensors = rec.live_tensors()
            for x in tensors:
                for module, attr in self.owners.get(id(x), []):
                    _guard(module, attr, rec.name(x))
            tensors[0].untyped_storage().resize_(0)  # the memory goes back to the allocator now

    def keep_reason(self, t: torch.Tensor) -> str | None:
        """Why `t` must stay in memory, or None when it can be released (after begin())."""
        reason = self._storage_reason(t)
        if reason is not None:
            return reason
        rec = self.registry.find(t)
        if any(c.tensor is None for c in rec.constants):
            return "a folded constant computed from it is not computed yet"
        for x in rec.live_tensors():
            if id(x) not in self.owners and id(x) not in self.outside:
                return "not examined for outside references"
            if id(x) in self.outside:
                return self.outside[id(x)]
            if not self.owners[id(x)]:
                return "no module owns it, so nothing could guard its eager use after a release"
        return None

    def _storage_reason(self, t: torch.Tensor) -> str | None:
        rec = self.registry.find(t)
        if rec is None:
            return "kiln never saw it as a weight of a compiled graph"
        if rec.readers:
            return next(iter(rec.readers.values()))
        # Each tensor on the storage holds it once, so does the Python storage object asked for here.
        if torch._C._storage_Use_Count(t.untyped_storage()._cdata) > len(rec.live_tensors()) + 1:
            return "another tensor shares its storage (a view or alias kiln was not handed)"
        return None


def _running_frames() -> set[int]:
    ids, frame = set(), sys._getframe()
    while frame is not None:
        ids.add(id(frame))
        frame = frame.f_back
    return ids


def _walk(tensors: list[torch.Tensor]) -> tuple[dict[int, str], dict[int, list]]:
    """For each tensor: why something outside its modules and the running call holds it (if so), and the
    (module, attribute) slots owning it. Walks up the gc-visible holders: one nothing visible holds
    belongs to running code; a module's _parameters/_buffers dict is an owner; anything else, or a
    chain longer than _DEPTH, is outside."""
    outside: dict[int, str] = {}
    owners: dict[int, list] = {id(t): [] for t in tensors}
    if not tensors:
        return outside, owners
    running = _running_frames()
    outside.update(_user_locals_holding(tensors))
    pins: list = [tensors]  # every temporary stays alive for the walk, so no object reuses its id
    skip = {id(tensors), id(pins)}
    ids = {id(t) for t in tensors}
    level, origins = [], {}  # origins: id(holder) -> ids of the tensors it leads to
    for r in _referrers(tensors, running, skip, pins):
        level.append(r)
        origins[id(r)] = {id(y) for y in gc.get_referents(r) if id(y) in ids}
    slots = []
    pins += [level, slots]
    skip.update((id(level), id(slots)))
    for depth in range(_DEPTH + 1):
        holders = _holders(level, running, skip, pins)
        up = []
        for r in level:
            held_by = holders[id(r)]
            if depth == 0 and isinstance(r, dict) and _is_module_slot(r, held_by):
                slots.append((r, held_by))
                continue
            if isinstance(r, _PASS_THROUGH) and not held_by:
                continue  # arguments held only by running code (user code's locals are checked above)
            if depth == _DEPTH or not isinstance(r, _PASS_THROUGH):
                for i in origins[id(r)]:
                    outside.setdefault(i, "referenced outside the model (e.g. by an optimizer, a variable or a "
                                          f"cache: a {type(r).__name__} holds it)")
                continue
            for h in held_by:
                origins.setdefault(id(h), set()).update(origins[id(r)])
                up.append(h)
        level = list({id(x): x for x in up}.values())
        pins += [up, level, holders]
        skip.update((id(up), id(level), id(holders)))
        if not level:
            break
    _find_owners(tensors, slots, owners, pins, skip)
    return outside, owners


_LIBRARY_DIRS = tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, sys.modules["kiln"]))


def _user_locals_holding(tensors: list[torch.Tensor]) -> dict[int, str]:
    """Tensors the caller's code holds in a local variable, or one level inside one (a list, tuple, set
    or dict). The caller's frames are the running ones older than the first frame of torch's, kiln's
    or generated code ("<eval_with_key>"): everything newer is the call itself, the model's forward too."""
    frames, frame = [], sys._getframe(1)
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    ids = {id(t) for t in tensors}
    out = {}
    for frame in reversed(frames):  # the oldest first
        code = frame.f_code
        if code.co_filename.startswith(_LIBRARY_DIRS + ("<eval_with_key>",)):
            break
        for name, v in list(frame.f_locals.items()):
            inner = v.values() if isinstance(v, dict) else v if isinstance(v, (list, tuple, set)) else ()
            for x in (v, *inner):
                if id(x) in ids:
                    out.setdefault(id(x), f"referenced outside the model (by variable '{name}' of {code.co_name})")
    return out


def _referrers(objs: list, running: set[int], skip: set[int], pins: list) -> list:
    found = gc.get_referrers(*objs)
    pins.append(found)
    skip.add(id(found))
    return [x for x in found if id(x) not in skip and not (isinstance(x, types.FrameType) and id(x) in running)]


def _holders(objs: list, running: set[int], skip: set[int], pins: list) -> dict[int, list]:
    """id(obj) -> the gc-visible objects referring to it, other than running frames and this module's temporaries."""
    out = {id(o): [] for o in objs}
    pins.append(out)
    skip.update([id(out)] + [id(v) for v in out.values()])
    if not objs:
        return out
    for x in _referrers(objs, running, skip, pins):
        for y in gc.get_referents(x):
            if id(y) in out:
                out[id(y)].append(x)
    return out


def _is_module_slot(d, holders: list) -> bool:
    """`d` is the _parameters or _buffers dict of a module (held by the module's __dict__)."""
    return any(isinstance(h, dict) and (h.get("_parameters") is d or h.get("_buffers") is d) for h in holders)


def _find_owners(tensors, slots, owners, pins, skip) -> None:
    module_dicts = {id(h): h for _, held_by in slots for h in held_by if isinstance(h, dict)}
    if not module_dicts:
        return
    dicts = list(module_dicts.values())
    pins.append(dicts)
    for m in _referrers(dicts, set(), skip | {id(dicts)}, pins):
        if not isinstance(m, torch.nn.Module):
            continue
        for table in (m._parameters, m._buffers):
            for attr, v in table.items():
                if id(v) in owners and any(v is t for t in tensors):
                    owners[id(v)].append((m, attr))


def _guard(module: torch.nn.Module, attr: str, name: str) -> None:
    entry = _guarded.get(module)
    if entry is None:
        entry = _guarded[module] = {"names": {}}
        entry["handles"] = (module.register_forward_pre_hook(_check_before_forward),
                            module._register_load_state_dict_pre_hook(_check_before_load, with_module=True))
    entry["names"][attr] = name


def _released_attrs(module: torch.nn.Module) -> list[str]:
    names = _guarded.get(module, {}).get("names", {})
    out = []
    for attr in names:
        t = module._parameters.get(attr, module._buffers.get(attr))
        if t is not None and released(t):
            out.append(attr)
    return out


def _message(module: torch.nn.Module, attrs: list[str], doing: str) -> str:
    names = _guarded[module]["names"]
    listed = ", ".join(f"'{names[a]}' ({type(module).__name__}.{a})" for a in attrs)
    return (f"kiln: cannot {doing}: {listed} released by donate_weights=True (every use was folded into a kiln "
            "constant). The kiln-compiled model still runs; the eager model cannot. Compile without donate_weights "
            "to keep the eager weights.")


def _check_before_forward(module, args):
    if torch.compiler.is_compiling():
        return None  # a graph being traced: kiln's compile checks released weights itself
    attrs = _released_attrs(module)
    if attrs:
        raise ReleasedWeightError(_message(module, attrs, f"run {type(module).__name__} eagerly"))
    return None


def _check_before_load(module, state_dict, prefix, *args):
    attrs = [a for a in _released_attrs(module) if prefix + a in state_dict]
    if attrs:
        raise ReleasedWeightError(_message(module, attrs, "load a state dict into it"))
