"""kiln in torch's caching precompile (kiln.precompile): a process that saved its compile lets the next
process skip Dynamo's tracing, and kiln compiles the loaded graph with the weights of the first call."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from kiln.options import Options

precompile_context = pytest.importorskip("torch._dynamo.precompile_context")

MODEL = textwrap.dedent('''
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(16, 512)
            self.fc2 = torch.nn.Linear(512, 8)

        def forward(self, x):
            h = torch.relu(self.fc1(x))
            torch._dynamo.graph_break()  # two graphs: each has its own artifact
            return self.fc2(h) * 2
''')

# One process: compile, compare with eager, update a weight in place, compare again, maybe save.
CHILD = textwrap.dedent('''
    import json, sys
    import torch
    import kiln
    from torch._dynamo.utils import counters
    import net

    device, save = sys.argv[1], sys.argv[2] == "save"
    torch.manual_seed(0)
    model = net.Net().eval().to(device)
    x = torch.randn(4, 16, device=device)
    with torch.no_grad():
        compiled = torch.compile(model, backend="kiln")
        got, want = compiled(x), model(x)
        model.fc1.weight.mul_(2)
        got2, want2 = compiled(x), model(x)
    from torch._dynamo.precompile_context import PrecompileContext
    artifact_chars = sum(len(a.content) for a in PrecompileContext._backend_artifacts_by_key.values())
    if save:
        torch.compiler.save_cache_artifacts()
    print(json.dumps({"artifact_chars": artifact_chars,
                      "weight_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
                      "diff": float((got - want).abs().max()),
                      "diff_after_update": float((got2 - want2).abs().max()),
                      "dynamo_graphs": counters["stats"]["unique_graphs"],
                      "kiln_graphs": len(kiln.memory_report().traces)}))
''')


def _run(folder, device, mode):
    env = dict(os.environ, TORCH_CACHING_PRECOMPILE="1", TORCHINDUCTOR_CACHE_DIR=str(folder / "torch"),
               KILN_CACHE_DIR=str(folder / "kiln"), PYTHONPATH=os.pathsep.join([str(folder)] + sys.path))
    out = subprocess.run([sys.executable, str(folder / "child.py"), device, mode], capture_output=True, text=True,
                         env=env, cwd=folder, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def test_a_saved_compile_loads_without_tracing_and_matches_eager(tmp_path, device):
    (tmp_path / "net.py").write_text(MODEL)
    (tmp_path / "child.py").write_text(CHILD)
    cold, _ = _run(tmp_path, device, "save")
    warm, log = _run(tmp_path, device, "load")
    assert cold["dynamo_graphs"] == 2 and cold["kiln_graphs"] == 2
    assert 0 < cold["artifact_chars"] < cold["weight_bytes"] / 4  # the graphs, not the weights' values
    assert warm["dynamo_graphs"] == 0, log[-3000:]  # Dynamo traced nothing: both graphs came from the cache
    assert warm["kiln_graphs"] == 2  # and kiln compiled both (not torch's eager graph)
    for run in (cold, warm):
        assert run["diff"] < 1e-5 and run["diff_after_update"] < 1e-5  # the in-place update is seen


def _artifact(**changes):
    from kiln.precompile import FORMAT, KilnCacheArtifact
    from kiln.capture_key import _versions

    payload = {"format": FORMAT, "versions": _versions(), "graph": {}, "capture": "", "weights": [], "names": [],
               "device": "cpu", "options": Options().as_dict(), **changes}
    return KilnCacheArtifact(key="__compiled_fn_1", content=json.dumps(payload))


def test_an_artifact_of_another_kiln_still_compiles_and_another_format_is_refused_by_name():
    from torch.fx.experimental.proxy_tensor import make_fx

    from kiln import graph_serial

    aten = make_fx(lambda x, w: torch.ops.aten.mm.default(x, w))(torch.randn(2, 4), torch.randn(4, 4))
    loaded = _artifact(versions="torch 0.0 kiln 123", graph=graph_serial.to_data(aten), weights=[False, True],
                       names=["x", "weight"]).after_deserialization()
    x, w = torch.randn(2, 4), torch.randn(4, 4)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x, w), x @ w)
    with pytest.raises(RuntimeError, match="format 'other'"):
        _artifact(format="other").after_deserialization()


def test_an_artifact_is_recorded_only_with_the_precompile_on(monkeypatch):
    from torch.fx.experimental.proxy_tensor import make_fx

    from kiln import precompile

    recorded = []
    monkeypatch.setattr(precompile_context.PrecompileContext, "record_artifact", recorded.append)
    monkeypatch.setattr(torch._dynamo.config, "caching_precompile", False)
    model = torch.nn.Linear(4, 4).eval()
    with torch.no_grad():
        torch.compile(model, backend="kiln")(torch.randn(2, 4))
    assert recorded == []
    monkeypatch.setattr(torch._dynamo.config, "caching_precompile", True)
    aten = make_fx(lambda x, w: torch.ops.aten.mm.default(x, w))(torch.randn(2, 4), torch.randn(4, 4))
    aten._backend_id = "__compiled_fn_7"
    precompile.record(aten, aten, "test", [False, True], ["x", "weight"], torch.device("cpu"), Options())
    assert [a.key for a in recorded] == ["__compiled_fn_7"]
    payload = json.loads(recorded[0].content)
    assert payload["names"] == ["x", "weight"] and payload["weights"] == [False, True]
