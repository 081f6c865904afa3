"""donate_weights=True on CPU (the same code path as CUDA): which eager weights are
released after their folds, which are kept (an unfolded use, a fallback op,
another graph, a storage shared with a tensor kiln was not handed, a
reference from outside the model), and the errors a released weight gives."""

import pytest
import torch
from conftest import assert_close

from kiln.dynamo_backend import kiln_backend
from kiln.folding import ReleasedWeightError


def _compile(model, **options):
    counter, reports = {"n": 0}, []

    def backend(gm, example_inputs):
        counter["n"] += 1
        return kiln_backend(gm, example_inputs, options=options, reports=reports)

    return torch.compile(model, backend=backend), counter, reports


def _mlp(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).eval()
    return model, torch.randn(4, 16)


def _released(model):
    return sorted(n for n, t in [*model.named_parameters(), *model.named_buffers()]
                  if t.numel() and t.untyped_storage().nbytes() == 0)


def _all_names(model):
    return sorted(n for n, _ in [*model.named_parameters(), *model.named_buffers()])


def test_fp32_weights_folded_to_fp16_are_released_and_the_compiled_model_still_runs():
    model, x = _mlp()
    with torch.no_grad():
        expected = model(x)
    compiled, counter, _ = _compile(model, precision="fp16", donate_weights=True)
    with torch.no_grad():
        first = compiled(x)
        second = compiled(x)
    assert _released(model) == _all_names(model)
    assert_close(first, expected, dtype=torch.float16)
    assert torch.equal(first, second) and counter["n"] == 1  # no recompile after the release
    assert model[0].weight.shape == (32, 16)  # metadata kept: Dynamo's guards still hold


def test_eager_model_raises_a_clear_error_naming_the_released_weight():
    model, x = _mlp()
    compiled, _, _ = _compile(model, precision="fp16", donate_weights=True)
    with torch.no_grad():
        compiled(x)
    with pytest.raises(ReleasedWeightError, match=r"'0\.weight' \(Linear\.weight\).*donate_weights"):
        model(x)
    with pytest.raises(ReleasedWeightError, match=r"load a state dict.*'2\.bias'"):
        model[2].load_state_dict({"weight": torch.zeros(8, 32), "bias": torch.zeros(8)})


def test_without_donation_nothing_is_released():
    model, x = _mlp()
    compiled, _, _ = _compile(model, precision="fp16")
    with torch.no_grad():
        compiled(x)
        model(x)  # the eager model still runs
    assert _released(model) == []


def test_batch_norm_folded_into_convolution_releases_the_conv_and_norm_weights():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU()).eval()
    with torch.no_grad():
        model[1].running_var.uniform_(0.5, 2)
        model[1].running_mean.uniform_(-1, 1)
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        expected = model(x)
    compiled, _, _ = _compile(model, donate_weights=True)
    with torch.no_grad():
        assert_close(compiled(x), expected)
    # Every weight is read only by the folds of W' and b'; num_batches_tracked is read by nothing.
    assert set(_released(model)) == {"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var"}


def test_a_weight_read_unfolded_is_kept():
    model, x = _mlp()
    compiled, _, _ = _compile(model, donate_weights=True)  # precision keep: weights are bound as they are
    with torch.no_grad():
        compiled(x)
        model(x)
    assert _released(model) == []


class _WithFallback(torch.nn.Module):
    """fc.weight is also read by cumprod, which kiln does not lower (a PyTorch fallback op)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x) + torch.cumprod(self.fc.weight, 0).sum()


def test_a_weight_a_fallback_op_reads_is_kept():
    torch.manual_seed(0)
    model, x = _WithFallback().eval(), torch.randn(2, 8)
    with torch.no_grad():
        expected = model(x)
    compiled, _, reports = _compile(model, precision="fp16", donate_weights=True)
    with torch.no_grad():
        out = compiled(x)
    assert any(not d.lowered and "cumprod" in d.target for r in reports for d in r.decisions)
    assert _released(model) == ["fc.bias"]  # the weight stays: cumprod reads it
    assert_close(out, expected, dtype=torch.float16)


def test_a_weight_another_graph_reads_unfolded_is_kept():
    model, x = _mlp()
    plain, _, _ = _compile(model)  # reads every weight as it is
    with torch.no_grad():
        plain(x)
    donating, _, _ = _compile(model, precision="fp16", donate_weights=True)
    with torch.no_grad():
        donating(x)
        plain(x)
    assert _released(model) == []


def test_a_graph_compiled_after_the_release_that_reads_the_weight_raises():
    model, x = _mlp()
    donating, _, _ = _compile(model, precision="fp16", donate_weights=True)
    with torch.no_grad():
        donating(x)
    plain, _, _ = _compile(model)
    with pytest.raises(Exception, match=r"reads weight '0\.weight'.*released"):
        with torch.no_grad():
            plain(x)


class _BreakThenSum(torch.nn.Module):
    """After the graph break the weight is read again: a new weight-only expression (a sum) of it."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8, bias=False)

    def forward(self, x):
        y = self.fc(x)
        torch._dynamo.graph_break()
        return y * self.fc.weight.sum()


class _BreakThenReuse(torch.nn.Module):
    """After the graph break the weight is used the same way (one shared folded constant)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8, bias=False)

    def forward(self, x):
        y = self.fc(x)
        torch._dynamo.graph_break()
        return self.fc(y * 2)


def test_a_graph_after_a_break_that_folds_a_released_weight_anew_raises_naming_it():
    torch.manual_seed(0)
    model, x = _BreakThenSum().eval(), torch.randn(2, 8)
    compiled, _, _ = _compile(model, precision="fp16", donate_weights=True)
    with pytest.raises(Exception, match=r"'fc\.weight'.*released"):
        with torch.no_grad():
            compiled(x)


def test_a_graph_after_a_break_reuses_the_folded_constant_of_a_released_weight():
    torch.manual_seed(0)
    model, x = _BreakThenReuse().eval(), torch.randn(2, 8)
    with torch.no_grad():
        expected = model(x)
    compiled, counter, reports = _compile(model, precision="fp16", donate_weights=True)
    with torch.no_grad():
        out = compiled(x)
    assert counter["n"] == 2 and _released(model) == ["fc.weight"]
    assert_close(out, expected, dtype=torch.float16)
    constants = [c for r in reports for region in r.region_modules if region.folds for c in region.folds.constants]
    assert len(constants) == 2 and constants[0].shared is constants[1].shared and constants[0].folds == 1


def test_a_storage_shared_with_a_module_kiln_did_not_compile_is_kept():
    model, x = _mlp()
    other = torch.nn.Linear(16, 32)
    other.weight = torch.nn.Parameter(model[0].weight.data)  # another tensor on the same storage
    compiled, _, _ = _compile(model, precision="fp16", donate_weights=True)
    with torch.no_grad():
        compiled(x)
        other(x)  # still runs: the storage it shares was kept
    assert "0.weight" not in _released(model) and "0.bias" in _released(model)


@pytest.mark.parametrize("holder", ["optimizer", "list", "dict"])
def test_a_weight_referenced_outside_the_model_is_kept(holder):
    model, x = _mlp()
    if holder == "optimizer":
        kept = torch.optim.SGD(model.parameters(), lr=0.1)
        expected_kept = _all_names(model)
    elif holder == "list":
        kept = [model[2].weight]
        expected_kept = ["2.weight"]
    else:
        kept = {"w": model[0].bias}
        expected_kept = ["0.bias"]
    compiled, _, _ = _compile(model, precision="fp16", donate_weights=True)
    with torch.no_grad():
        compiled(x)
    assert sorted(set(_all_names(model)) - set(_released(model))) == expected_kept
    del kept  # held through the compiled call


def test_a_replaced_weight_after_donation_is_folded_again_and_the_eager_model_runs():
    model, x = _mlp()
    compiled, counter, _ = _compile(model, precision="fp16", donate_weights=True)
    with torch.no_grad():
        compiled(x)
        model[0].weight.data = torch.randn(32, 16)  # new data for a released weight
        assert _released(model) == ["0.bias", "2.bias", "2.weight"]
        with pytest.raises(ReleasedWeightError, match="'0.bias'"):
            model(x)
        model[0].bias.data = torch.randn(32)
        model[2].weight.data = torch.randn(8, 32)
        model[2].bias.data = torch.randn(8)
        assert_close(compiled(x), model(x), dtype=torch.float16)
    assert counter["n"] == 1
