"""Python's cyclic garbage collector paused while kiln compiles a graph. A compile makes tens of
thousands of short-lived objects (FX nodes, fake tensors, kiln values), enough to trigger several
collections, each walking every tracked object of the process (the model's and Dynamo's included):
on a 12-layer LLaMA decoding step, about a fifth of a specialization's time on the development CPU.
Whatever the compile leaves cyclic is collected after it, as usual."""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def gc_paused():
    """Disables the cyclic collector for the block, unless the caller already had it off."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
