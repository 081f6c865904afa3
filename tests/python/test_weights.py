"""Weights by reference (Note [Weights]): kiln never copies a parameter, binds a
shared storage once, keeps what it reads alive, and sees in-place updates
(copy_, load_state_dict, optimizer steps) on the next call without recompiling."""

import functools
import gc
import weakref

import pytest
import torch
import torchvision

from conftest import assert_close
from kiln.dynamo_backend import kiln_backend


def compile_with_reports(model):
    reports = []
    backend = functools.partial(kiln_backend, reports=reports)
    return torch.compile(model, backend=backend), reports


def storage_span(t: torch.Tensor):
    s = t.untyped_storage()
    return s.data_ptr(), s.data_ptr() + s.nbytes()


def test_resnet_weights_are_bound_by_pointer_and_never_copied():
    torch.manual_seed(0)
    model = torchvision.models.resnet18().eval()
    x = torch.randn(1, 3, 32, 32)
    # fold="none": every weight read in place. With folding on, batch norms become
    # folded constants (kiln-owned, derived, not copies); test_folding.py covers those.
    reports = []
    compiled = torch.compile(model, backend=functools.partial(kiln_backend, reports=reports, options={"fold": "none"}))
    with torch.no_grad():
        assert_close(compiled(x), model(x))
    regions = [r for g in reports for r in g.region_modules]
    assert regions
    tensors = list(model.parameters()) + list(model.buffers())
    spans = [storage_span(t) for t in tensors if t.numel() > 0]
    weight_ptrs = {t.data_ptr() for t in tensors}
    bound = 0
    for region in regions:
        exe = region.exe
        for key, ptr in exe.bound_weights().items():
            assert ptr in weight_ptrs, f"weight {key} is bound to memory no parameter owns"
            bound += 1
        # kiln-owned memory (its arena) overlaps no parameter storage, and the
        # program carries no weight-sized constants.
        lo, hi = exe.arena_address(), exe.arena_address() + exe.arena_bytes()
        for s_lo, s_hi in spans:
            assert hi <= s_lo or s_hi <= lo
        assert exe.literal_bytes() < 1024
    n_weights = sum(1 for t in tensors if t.dtype.is_floating_point)
    assert bound == n_weights  # every floating parameter and BN statistic is read in place


class TiedLM(torch.nn.Module):
    def __init__(self, vocab=50, dim=16):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.norm = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied

    def forward(self, ids):
        return self.head(self.norm(self.embed(ids)))


def test_tied_embedding_and_head_are_bound_once():
    torch.manual_seed(0)
    model = TiedLM().eval()
    ids = torch.randint(0, 50, (2, 7))
    compiled, reports = compile_with_reports(model)
    with torch.no_grad():
        assert_close(compiled(ids), model(ids))
    bindings = [ptr for g in reports for r in g.region_modules for ptr in r.exe.bound_weights().values()]
    assert bindings.count(model.embed.weight.data_ptr()) == 1


def test_compiled_program_keeps_weights_alive_and_releases_them_after():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
    x = torch.randn(2, 8)
    with torch.no_grad():
        expected = model(x)
    weight_ref = weakref.ref(model[0].weight)
    compiled, reports = compile_with_reports(model)
    with torch.no_grad():
        compiled(x)
    del model
    gc.collect()
    assert weight_ref() is not None  # kiln still reads it
    with torch.no_grad():
        assert_close(compiled(x), expected)
    del compiled, reports
    torch._dynamo.reset()
    gc.collect()
    assert weight_ref() is None  # nothing of kiln's holds it any more


def _count_compiles():
    counter = {"n": 0}

    def backend(gm, example_inputs, **kw):
        counter["n"] += 1
        return kiln_backend(gm, example_inputs, **kw)

    return backend, counter


@pytest.mark.parametrize("update", ["copy_", "load_state_dict", "optimizer_step", "replace_data"])
def test_parameter_update_after_compile_is_seen_without_recompiling(update):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).eval()
    x = torch.randn(3, 8)
    backend, counter = _count_compiles()
    compiled = torch.compile(model, backend=backend)
    with torch.no_grad():
        before = compiled(x)
    if update == "copy_":
        with torch.no_grad():
            model[0].weight.copy_(torch.randn_like(model[0].weight))
    elif update == "load_state_dict":
        fresh = {k: torch.randn_like(v) for k, v in model.state_dict().items()}
        model.load_state_dict(fresh)
    elif update == "optimizer_step":
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        model(x).pow(2).sum().backward()  # eager, outside the compiled program
        opt.step()
    else:
        model[2].bias.data = torch.randn(4)  # new storage: kiln re-binds it
    with torch.no_grad():
        after = compiled(x)
        expected = model(x)
    assert not torch.allclose(before, expected)
    assert_close(after, expected)
    assert counter["n"] == 1
