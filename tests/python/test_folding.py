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


def _compile(model, **options):
    """torch.compile with kiln; also returns the compile count and the graph reports."""
    counter, reports = {"n": 0}, []

    def backend(gm, example_inputs):
        counter["n"] += 1
        return kiln_backend(gm, example_inputs, options=options, reports=reports)

    return torch.compile(model, backend=backend), counter, reports


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
    assert names == ["start", "import", "lower", "fold", "first run", "after"]
    after = traces[0].stage("after")
    assert after.rss_bytes > 0
    assert after.kiln_bytes >= sum(c.nbytes for c in _constants(reports)) > 0
    assert "first run" in str(kiln.memory_report())
