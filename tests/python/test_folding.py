"""Folded constants (kiln.folding) and the precision option, on CPU: batch
norm folded into convolution, fp16/bf16 compiles of fp32 models, what stays
in memory after folding, re-folds after in-place updates, and what is never
folded (a transposed GEMM weight, anything under fold="none")."""

import gc
import weakref

import pytest
import torch
from conftest import assert_close

import kiln
import kiln.folding
from kiln.dynamo_backend import kiln_backend


def _conv_bn(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 4, 3, bias=False), torch.nn.BatchNorm2d(4), torch.nn.Flatten(),
        torch.nn.Linear(4 * 6 * 6, 10),
    ).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
                m.weight.uniform_(0.5, 2)
                m.bias.uniform_(-1, 1)
    return model, torch.randn(2, 3, 8, 8)


def _mlp(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).eval()
    return model, torch.randn(4, 16)


def _compile(model, dynamic=None, **options):
    """torch.compile with kiln; also returns the compile count and the graph reports."""
    counter, reports = {"n": 0}, []

    def backend(gm, example_inputs):
        counter["n"] += 1
        return kiln_backend(gm, example_inputs, options=options, reports=reports)

    return torch.compile(model, backend=backend, dynamic=dynamic), counter, reports


def _constants(reports):
    return [c for r in reports for region in r.region_modules if region.folds for c in region.folds.constants]


def _op_counts(reports):
    counts = {}
    for r in reports:
        for _, ops, _ in r.regions:
            for op, n in ops.items():
                counts[op] = counts.get(op, 0) + n
    return counts


def test_conv_batch_norm_is_folded_into_the_convolution():
    model, x = _conv_bn()
    compiled, _, reports = _compile(model)
    with torch.no_grad():
        out = compiled(x)
        expected = model(x)
    assert_close(out, expected)
    ops = _op_counts(reports)
    assert "batch_norm" not in ops and "rsqrt" not in ops and ops["conv2d"] == 2
    constants = _constants(reports)
    assert [c.key for c in constants] == ["fold:0", "fold:1", "fold:2", "fold:3"]  # W' and b' of each conv
    assert all(c.graph.num_nodes() > 0 and c.folds == 1 for c in constants)
    assert "rsqrt" in constants[0].graph.op_counts()  # the fold graph holds the batch-norm math


@pytest.mark.parametrize("precision,dtype", [("fp16", torch.float16), ("bf16", torch.bfloat16)])
@pytest.mark.parametrize("make", [_mlp, _conv_bn], ids=["mlp", "cnn"])
def test_precision_matches_eager_and_returns_the_eager_dtype(make, precision, dtype):
    model, x = make()
    compiled, _, reports = _compile(model, precision=precision)
    with torch.no_grad():
        out = compiled(x)
        expected = model(x)
    assert out.dtype == torch.float32
    assert_close(out, expected, dtype=dtype)
    # Every weight is held once, in half precision, as a folded constant.
    assert all(c.tensor.dtype == dtype for c in _constants(reports))
    assert _op_counts(reports)["cast"] == 2  # the input cast down, the output cast back


def test_fold_intermediates_are_freed_and_only_the_constants_remain(monkeypatch):
    executables = []
    real = kiln.folding.compile_graph

    def tracking(graph, device="cpu", optimize=True):
        exe = real(graph, device, optimize)
        executables.append(weakref.ref(exe))
        return exe

    monkeypatch.setattr(kiln.folding, "compile_graph", tracking)
    model, x = _mlp()
    compiled, _, reports = _compile(model, precision="fp16")
    with torch.no_grad():
        compiled(x)
    gc.collect()
    assert len(executables) == 4 and all(ref() is None for ref in executables)  # fold arenas are gone
    constants = _constants(reports)
    expected_bytes = sum(p.numel() * 2 for p in model.parameters())  # one fp16 copy of each weight
    assert sum(c.nbytes for c in constants) == expected_bytes
    param_ptrs = {p.data_ptr() for p in model.parameters()}
    assert not any(c.tensor.data_ptr() in param_ptrs for c in constants)
    # The fp32 weights are no longer bound by the main program: only the fold graphs read them.
    region = reports[0].region_modules[0]
    assert all(t is None for t in region.bound_tensors)


@pytest.mark.parametrize("update", ["copy_", "load_state_dict", "optimizer_step"])
@pytest.mark.parametrize("precision", ["keep", "fp16"])
def test_update_after_compile_refolds_without_recompiling(update, precision):
    model, x = _conv_bn()
    compiled, counter, reports = _compile(model, precision=precision)
    with torch.no_grad():
        before = compiled(x)
    if update == "copy_":
        with torch.no_grad():
            model[0].weight.copy_(torch.randn_like(model[0].weight))
            model[1].running_var.mul_(3.0)
    elif update == "load_state_dict":
        model.load_state_dict({k: (v * 1.5 if v.is_floating_point() else v) for k, v in model.state_dict().items()})
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model(x).pow(2).sum().backward()
        opt.step()
    with torch.no_grad():
        after = compiled(x)
        expected = model(x)
    assert not torch.allclose(before, expected)
    assert_close(after, expected, dtype=torch.float16 if precision == "fp16" else None)
    assert counter["n"] == 1
    assert any(c.folds == 2 for c in _constants(reports))
    with torch.no_grad():
        compiled(x)
    assert all(c.folds <= 2 for c in _constants(reports))  # nothing changed: no re-fold


def test_transposed_gemm_weight_is_not_folded():
    model, x = _mlp()
    compiled, _, reports = _compile(model)
    with torch.no_grad():
        assert_close(compiled(x), model(x))
    assert _constants(reports) == []
    assert "permute" in _op_counts(reports)  # matmul reads the weight through a view
    region = reports[0].region_modules[0]
    bound = {t.data_ptr() for t in region.bound_tensors if t is not None}
    assert {p.data_ptr() for p in model.parameters()} <= bound  # bound by pointer, not copied


def test_fold_none_disables_folding():
    model, x = _conv_bn()
    compiled, _, reports = _compile(model, fold="none")
    with torch.no_grad():
        assert_close(compiled(x), model(x))
    assert _constants(reports) == []
    assert _op_counts(reports)["batch_norm"] == 2


def test_fold_none_with_precision_casts_on_every_call():
    model, x = _mlp()
    compiled, _, reports = _compile(model, fold="none", precision="bf16")
    with torch.no_grad():
        assert_close(compiled(x), model(x), dtype=torch.bfloat16)
    assert _constants(reports) == []


def test_memory_report_records_the_stages():
    kiln.memory_report(clear=True)
    model, x = _conv_bn()
    compiled, _, reports = _compile(model, precision="fp16")
    with torch.no_grad():
        compiled(x)
    traces = kiln.memory_report().traces
    assert len(traces) == 1 and reports[0].memory is traces[0]
    names = [s.name for s in traces[0].stages]
    assert names == ["start", "import", "plan", "lower", "called", "fold", "first run", "after"]
    after = traces[0].stage("after")
    assert after.rss_bytes > 0
    assert after.kiln_bytes >= sum(c.nbytes for c in _constants(reports)) > 0
    assert "first run" in str(kiln.memory_report())


class _FoldProbe:
    """Counts what kiln holds while it folds: wraps the fold executables so that, at the moment each
    fold runs (its source, its new buffer and its arena all alive), the bytes held by the model's
    weights, the constants already computed and the live fold arenas are summed. Executables may be
    compiled ahead (compiling allocates no arena), but one that has run must be gone before the next runs."""

    def __init__(self, monkeypatch, model, reports):
        self.model, self.reports, self.live, self.samples = model, reports, [], []
        real = kiln.folding.compile_graph

        def tracking(graph, device="cpu", **kw):
            exe = _Counted(real(graph, device, **kw), self)
            self.live.append(weakref.ref(exe))
            return exe

        monkeypatch.setattr(kiln.folding, "compile_graph", tracking)

    def weight_bytes(self):
        return sum(t.untyped_storage().nbytes() for t in [*self.model.parameters(), *self.model.buffers()])

    def constant_bytes(self):
        return sum(c.nbytes for c in _constants(self.reports))


class _Counted:
    """A fold executable that samples _FoldProbe's measure when it runs."""

    def __init__(self, exe, probe):
        self.exe, self.probe, self.ran = exe, probe, False

    def run(self, inputs, outputs, stream=0):
        others = [ref() for ref in self.probe.live if ref() is not self]
        assert not any(e is not None and e.ran for e in others), "a fold ran while an earlier fold's arena was alive"
        assert all(e is None or e.exe.arena_address() == 0 for e in others), "a fold arena was allocated ahead"
        self.ran = True
        out = outputs[0]
        self.probe.samples.append((self.probe.weight_bytes(), self.probe.constant_bytes(), self.exe.arena_bytes(),
                                   out.numel() * out.element_size()))
        self.exe.run(inputs, outputs, stream)

    def step_timings(self):
        return self.exe.step_timings()


def _wide_mlp(layers=4, width=64):
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False) for _ in range(layers)]).eval()
    return model, torch.randn(3, width)


@pytest.mark.parametrize("donate", [False, True])
def test_folds_run_one_at_a_time_and_the_peak_is_bounded_by_one_constant(monkeypatch, donate):
    model, x = _wide_mlp()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    compiled, _, reports = _compile(model, precision="fp16", donate_weights=donate)
    probe = _FoldProbe(monkeypatch, model, reports)
    with torch.no_grad():
        reference = model(x)  # before the call: donation ends eager runs
        out = compiled(x)
    assert_close(out, reference, dtype=torch.float16)
    constants = _constants(reports)
    largest = max(c.nbytes for c in constants)
    assert len(probe.samples) == len(constants) == 4
    for held_weights, held_constants, arena, writing in probe.samples:
        assert arena == 0 and writing <= largest  # written straight into the final buffer, no intermediate
        if donate:
            # Each fp32 source is released as its fold completes: never all of them and all folds at once
            # (held_constants counts the buffer being written).
            assert held_weights + held_constants <= weights + largest
    final = probe.weight_bytes() + probe.constant_bytes()
    assert final == (weights // 2 if donate else weights + weights // 2)
    assert all(c.tensor.device == p.device for c, p in zip(constants, model.parameters()))


def test_a_transposed_gemm_weight_is_folded_in_its_own_layout():
    model, x = _mlp()
    compiled, _, reports = _compile(model, precision="fp16")
    with torch.no_grad():
        compiled(x)
    # The fp16 copies keep the weights' [out, in] layout: the GEMM reads them transposed (no permute folded).
    shapes = sorted(tuple(c.tensor.shape) for c in _constants(reports))
    assert shapes == sorted(tuple(p.shape) for p in model.parameters())
    assert all("permute" not in c.graph.op_counts() for c in _constants(reports))


class _TwoGraphs(torch.nn.Module):
    """One Linear used on both sides of a graph break: two Dynamo graphs, one weight."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.fc(x)
        torch._dynamo.graph_break()
        return self.fc(y * 2)


def test_a_weight_shared_across_a_graph_break_is_folded_once():
    torch.manual_seed(0)
    model, x = _TwoGraphs().eval(), torch.randn(2, 8)
    compiled, counter, reports = _compile(model, precision="fp16")
    with torch.no_grad():
        assert_close(compiled(x), model(x), dtype=torch.float16)
    assert counter["n"] == 2
    first, second = [[c for region in r.region_modules if region.folds for c in region.folds.constants] for r in reports]
    assert [c.shared for c in first] == [c.shared for c in second]  # one constant per weight for both graphs
    assert all(c.folds == 1 for c in first)
    bound = [region.folds.bound for r in reports for region in r.region_modules if region.folds]
    assert {id(t) for t in bound[0].values()} == {id(t) for t in bound[1].values()}


def test_recompiles_for_new_shapes_share_the_folded_constants():
    model, x = _mlp()
    compiled, counter, reports = _compile(model, dynamic=False, precision="fp16")
    with torch.no_grad():
        compiled(x)
        wider = torch.randn(7, 16)
        assert_close(compiled(wider), model(wider), dtype=torch.float16)
    assert counter["n"] == 2
    per_graph = [{c.shared for region in r.region_modules if region.folds for c in region.folds.constants}
                 for r in reports]
    assert per_graph[0] == per_graph[1] and all(c.folds == 1 for c in per_graph[0])


class _Tied(torch.nn.Module):
    def __init__(self, vocab=32, dim=8, alias=False):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
        self.head = torch.nn.Linear(dim, vocab, bias=False)
        # Tied: the same Parameter, or (alias) another Parameter on the same storage.
        self.head.weight = torch.nn.Parameter(self.emb.weight.data) if alias else self.emb.weight

    def forward(self, ids):
        return self.head(torch.relu(self.emb(ids)) * 1.5)


@pytest.mark.parametrize("alias", [False, True], ids=["same_parameter", "same_storage"])
@pytest.mark.parametrize("precision", ["keep", "fp16"])
def test_tied_embedding_and_head_are_held_once(alias, precision):
    torch.manual_seed(0)
    model, ids = _Tied(alias=alias).eval(), torch.randint(0, 32, (2, 5))
    compiled, _, reports = _compile(model, precision=precision)
    with torch.no_grad():
        assert_close(compiled(ids), model(ids), dtype=torch.float16 if precision == "fp16" else None)
    storage = model.emb.weight.untyped_storage().data_ptr()
    if precision == "keep":
        bound = [t for r in reports for region in r.region_modules for t in region.bound_tensors if t is not None]
        assert {t.untyped_storage().data_ptr() for t in bound} == {storage}  # bound by pointer, no copy
    else:
        shared = {c.shared for c in _constants(reports)}
        assert len(shared) == 1 and next(iter(shared)).folds == 1  # one fp16 copy for both uses


def test_a_new_model_on_reused_storage_addresses_never_gets_an_old_constant():
    # Constants of earlier models stay alive (their reports are kept) while new models are built on
    # freed memory, often at the same addresses: each must fold its own weights.
    kept = []
    for seed in range(5):
        model, x = _wide_mlp(layers=2)
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(seed, 0.1)
            expected = model(x)
        compiled, _, reports = _compile(model, precision="fp16")
        with torch.no_grad():
            assert_close(compiled(x), expected, dtype=torch.float16, atol=0.1, rtol=0.02)
        kept.append(reports)
        del model, compiled
        torch._dynamo.reset()


def test_kernel_timings_cover_the_program_and_the_folds_of_the_last_refresh():
    model, x = _conv_bn()
    compiled, _, reports = _compile(model)
    with torch.no_grad():
        compiled(x)
    table = reports[0].kernel_timings()
    region = reports[0].region_modules[0]
    steps = region.exe.step_timings()
    assert sum(n for kind, (n, _, _) in table.items() if not kind.startswith("fold: ")) == len(steps)
    assert table["cpu conv2d_fused"][0] + table.get("cpu conv2d", [0])[0] == 2
    assert all(first_run_ms >= 0 for _, _, _, first_run_ms in steps)  # the first call launched every kernel
    fold_kernels = sum(n for kind, (n, _, _) in table.items() if kind.startswith("fold: "))
    assert fold_kernels == len(region.folds.step_timings) > 0
    assert region.folds.compile_s > 0 and region.folds.run_s > 0 and region.folds.drop_s > 0
    # A re-fold (the first convolution's two constants) replaces the timings with its own: they never pile up.
    refolded = []
    for _ in range(2):
        with torch.no_grad():
            model[1].running_var.mul_(2.0)
            compiled(x)
        refolded.append(len(region.folds.step_timings))
    assert 0 < refolded[0] == refolded[1] < fold_kernels
