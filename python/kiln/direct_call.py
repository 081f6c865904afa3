"""The compiled graph's call without torch.nn.Module's call machinery, for the common case of one
kiln region doing all the work: a GraphModule that passes its inputs to one KilnRegion and returns
its results. Calling that GraphModule costs two module calls (hook checks, the generated forward)
before kiln's own work starts, on every call; the direct call indexes the inputs and calls the
region's forward. The first call still goes through the module, so the hooks kiln registers for
that call (the memory trace's "after" stage) run."""

from __future__ import annotations

import operator

import torch.fx as fx

from kiln.region import KilnRegion, items_getter


def _recipe(value, call: fx.Node):
    """Which of the region's results an output element is: "all" (the one result), an index, or None
    when it is something else."""
    if value is call:
        return "all"
    if isinstance(value, fx.Node) and value.op == "call_function" and value.target is operator.getitem \
            and value.args[0] is call and isinstance(value.args[1], int):
        return value.args[1]
    return None


def direct_call(module):
    """A function equivalent to `module(*args)`, or None when `module` is not one region's wrapper."""
    graph = getattr(module, "graph", None)
    if not isinstance(module, fx.GraphModule) or graph is None:
        return None
    nodes = list(graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    calls = [n for n in nodes if n.op == "call_module"]
    if len(calls) != 1:
        return None
    call = calls[0]
    region = module.get_submodule(call.target)
    constant = {n: getattr(module, n.target) for n in nodes if n.op == "get_attr"}  # fixed attributes
    if type(region) is not KilnRegion or call.kwargs or any(a not in placeholders and a not in constant
                                                              for a in call.args):
        return None
    if any(n.op == "call_function" and not (n.target is operator.getitem and n.args[0] is call) for n in nodes):
        return None
    out = next(n for n in nodes if n.op == "output").args[0]
    as_tuple = isinstance(out, (tuple, list))
    recipes = [_recipe(v, call) for v in (out if as_tuple else [out])]
    if any(r is None for r in recipes):
        return None
    # Each region argument: the index of a graph input, or a constant attribute's tensor itself. Without
    # constants, one C-level getter picks them (a Python loop over BERT-base's 200 arguments: 16 us per call
    # under cProfile on the dev CPU).
    sources = [placeholders.index(a) if a in placeholders else constant[a] for a in call.args]
    if all(type(s) is int for s in sources):
        region_args = items_getter(sources)
    else:
        def region_args(args):
            return [args[s] if type(s) is int else s for s in sources]
    region_forward = region.forward
    first = [True]

    def run(*args):
        if first[0]:
            first[0] = False
            return module(*args)  # the first call's hooks
        result = region_forward(*region_args(args))
        values = [result if r == "all" else result[r] for r in recipes]
        return type(out)(values) if as_tuple else values[0]

    return run
