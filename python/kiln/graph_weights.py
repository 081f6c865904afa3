"""Attaches one compiled graph's weights to the weight registry (kiln.weight_registry).

Called once per compiled graph, with the real tensors behind its weight
placeholders (Dynamo's example inputs; fake tensors carry no storage):

- each weight a fallback op, the graph's output or a region's program reads
  unfolded is recorded as read by this graph (donation keeps it);
- each region's folded constants become the registry's shared ones, so a
  constant computed by any graph of the model is reused, not recomputed;
- with donate_weights, each region releases sources as their folds complete;
- a weight an earlier compile released, that this graph would read unfolded
  or fold anew, raises ReleasedWeightError naming it here, at compile time.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from kiln import donation
from kiln.folding import ReleasedWeightError, SharedConstant, released
from kiln.options import Options
from kiln.weight_registry import REGISTRY, WeightRegistry


def attach(module: fx.GraphModule, regions: list, weight_tensors: dict[str, torch.Tensor],
           weight_names: dict[str, str], options: Options, registry: WeightRegistry = REGISTRY) -> None:
    """`regions`: (KilnRegion, its outer argument nodes) of `module`; `weight_tensors`: placeholder name -> tensor."""
    gid = registry.new_graph(module)
    by_name = {region.name: (region, args) for region, args in regions}
    names = {p: weight_names.get(p, p) for p in weight_tensors}
    for node in module.graph.nodes:
        if node.op != "placeholder" or node.name not in weight_tensors:
            continue
        t = weight_tensors[node.name]
        registry.record(t, names[node.name])
        for user in node.users:
            why = _unfolded_use(user, node, by_name)
            if why is not None:
                registry.add_reader(gid, t, names[node.name], why)
    for region, args in regions:
        if region.folds is None:
            continue
        for fold, indices in zip(region.folds.constants, region.folds.arg_indices):
            if any(args[i].name not in weight_tensors for i in indices):
                # A source kiln holds no real tensor for (a constant attribute): the fold stays private,
                # and the weights it reads are kept (nothing tracks when it is computed).
                for i in indices:
                    if args[i].name in weight_tensors:
                        registry.add_reader(gid, weight_tensors[args[i].name], names[args[i].name],
                                            f"an unshared fold of kiln region {region.name} reads it")
                continue
            sources = [weight_tensors[args[i].name] for i in indices]
            source_names = [names[args[i].name] for i in indices]
            fold.shared = registry.constant(fold.graph, sources,
                                            lambda g=fold.graph, n=source_names: SharedConstant(g, source_names=n))
            _check_fold(fold.shared, sources, source_names)
        if options.donate_weights:
            region.folds.donor = donation.Donor(registry)
    for node_name, t in weight_tensors.items():
        rec = registry.find(t)
        if released(t) and rec is not None and gid in rec.readers:
            raise ReleasedWeightError(
                f"kiln: this graph reads weight '{names[node_name]}' ({rec.readers[gid]}), which donate_weights=True "
                "released after an earlier compile folded its every use. Compile the model without donate_weights "
                "(or avoid the graph break or recompile that needs it).")


def _unfolded_use(user: fx.Node, node: fx.Node, regions: dict) -> str | None:
    """How `user` reads the weight `node` other than through a folded constant, or None."""
    if user.op == "call_module" and user.target in regions:
        region, _ = regions[user.target]
        folded = {i for indices in (region.folds.arg_indices if region.folds else []) for i in indices}
        for i, a in enumerate(user.args):
            if a is node and (region.arg_is_weight[i] or (not region.arg_is_dead[i] and i not in folded)):
                return f"kiln region {region.name} reads it unfolded"
        return None
    if user.op == "output":
        return "the compiled graph returns it"
    target = getattr(user.target, "__name__", str(user.target))
    return f"PyTorch fallback op {target} reads it"


def _check_fold(shared: SharedConstant, sources: list[torch.Tensor], names: list[str]) -> None:
    if shared.tensor is not None:
        return  # computed by an earlier graph: nothing to read
    for t, name in zip(sources, names):
        if released(t):
            raise ReleasedWeightError(
                f"kiln: this graph folds weight '{name}' in a way no earlier graph did, and donate_weights=True "
                "released it after an earlier compile. Compile the model without donate_weights.")
