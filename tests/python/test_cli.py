"""The kiln command (src/cli): `kiln run` on a saved program writes .npy
outputs equal bit for bit to the in-process program's; `kiln inspect` lists
the ops, weights and sizes; `kiln bench` prints percentiles; bad arguments,
files and inputs give a clear error and a nonzero exit status."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import kiln
from conftest import cuda_available


def _find_cli() -> str:
    """The installed binary (beside the interpreter), $KILN_CLI, or the one in
    the build folder the kiln module was built in (a dev checkout's symlink)."""
    candidates = [os.environ.get("KILN_CLI"), str(Path(sys.executable).parent / "kiln")]
    module = Path(kiln._kiln.__file__).resolve()
    candidates.append(str(module.parent / "kiln"))
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    found = shutil.which("kiln")
    if found is None:
        pytest.fail("the kiln command is not built or installed (looked beside python, $KILN_CLI, the build folder)")
    return found


CLI = None


def kiln_cli(*args, check=True, env=None):
    global CLI
    CLI = CLI or _find_cli()
    result = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=300, env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"kiln {args} exited {result.returncode}: {result.stderr}")
    return result


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.fc = torch.nn.Linear(6 * 4 * 4, 5)

    def forward(self, x, scale):
        h = torch.relu(self.conv(x)) * scale
        return self.fc(h.flatten(1)), h.sum(dim=1)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    torch.manual_seed(0)
    model = Net().eval()
    x, scale = torch.randn(2, 3, 4, 4), torch.randn(1, 6, 1, 1)
    program = kiln.compile(model, [x, scale])
    folder = tmp_path_factory.mktemp("cli")
    kiln.save(program, folder / "net.kiln")
    return program, model, folder, (x, scale)


def test_run_equals_in_process(saved):
    program, _, folder, (x, scale) = saved
    np.save(folder / "x.npy", x.numpy())
    np.save(folder / "scale.npy", scale.numpy())
    out = folder / "out"
    result = kiln_cli("run", folder / "net.kiln", "--input", folder / "x.npy", "--input", folder / "scale.npy",
                      "--out", out)
    expected = program(x, scale)
    for i, want in enumerate(expected):
        got = np.load(out / f"output_{i}.npy")
        assert got.dtype == np.float32 and got.shape == tuple(want.shape)
        assert got.tobytes() == want.numpy().tobytes()
        assert f"output_{i}.npy" in result.stdout


def test_run_random_inputs_is_deterministic(saved, tmp_path):
    _, _, folder, _ = saved
    kiln_cli("run", folder / "net.kiln", "--out", tmp_path / "a", "--seed", "3")
    kiln_cli("run", folder / "net.kiln", "--out", tmp_path / "b", "--seed", "3")
    for i in range(2):
        a, b = np.load(tmp_path / "a" / f"output_{i}.npy"), np.load(tmp_path / "b" / f"output_{i}.npy")
        assert a.tobytes() == b.tobytes() and np.isfinite(a).all()


def test_weightless_program_runs_with_safetensors(saved, tmp_path):
    from safetensors.torch import save_file

    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()
    x = torch.randn(4, 8)
    program = kiln.compile(model, [x])
    expected = program(x)
    kiln.save(program, tmp_path / "bare.kiln", weights=False)
    np.save(tmp_path / "x.npy", x.numpy())
    missing = kiln_cli("run", tmp_path / "bare.kiln", "--input", tmp_path / "x.npy", check=False)
    assert missing.returncode == 1 and "holds no data" in missing.stderr and "--weights" in missing.stderr
    save_file(model.state_dict(), tmp_path / "w.safetensors")
    kiln_cli("run", tmp_path / "bare.kiln", "--input", tmp_path / "x.npy", "--weights", tmp_path / "w.safetensors",
             "--out", tmp_path / "out")
    assert np.load(tmp_path / "out" / "output_0.npy").tobytes() == expected.numpy().tobytes()
    # A safetensors file whose tensor has another shape is named in the error.
    save_file({"0.weight": torch.zeros(16, 9), "0.bias": torch.zeros(16)}, tmp_path / "bad.safetensors")
    bad = kiln_cli("run", tmp_path / "bare.kiln", "--weights", tmp_path / "bad.safetensors", check=False)
    assert bad.returncode == 1 and "0.weight" in bad.stderr and "[16,9]" in bad.stderr.replace(" ", "")


def test_inspect(saved):
    _, model, folder, _ = saved
    out = kiln_cli("inspect", folder / "net.kiln").stdout
    size = (folder / "net.kiln").stat().st_size
    assert f"size: {size} bytes" in out
    for name, p in model.state_dict().items():
        assert name in out, name
        assert f"{p.numel() * 4} bytes" in out
    assert "ops:" in out and "conv2d" in out
    assert "weight data" in out and "kernels and memory plan:" in out
    assert "graph {" in kiln_cli("inspect", folder / "net.kiln", "--graph").stdout


def test_bench(saved):
    _, _, folder, _ = saved
    out = kiln_cli("bench", folder / "net.kiln", "--iters", "20", "--warmup", "2").stdout
    assert "20 calls after 2 warmup" in out
    for key in ("p50", "p90", "p99"):
        assert key in out


@pytest.mark.parametrize("command", ["inspect", "run", "bench"])
def test_help(command):
    result = kiln_cli(command, "--help")
    assert result.stdout.startswith(f"usage: kiln {command}")


def test_bad_usage_and_files(saved, tmp_path):
    _, _, folder, _ = saved
    assert kiln_cli(check=False).returncode == 2
    r = kiln_cli("frobnicate", check=False)
    assert r.returncode == 2 and "unknown command" in r.stderr
    r = kiln_cli("run", folder / "net.kiln", "--bogus", check=False)
    assert r.returncode == 2 and "unknown option '--bogus'" in r.stderr
    r = kiln_cli("bench", folder / "net.kiln", "--iters", "many", check=False)
    assert r.returncode == 2 and "--iters" in r.stderr
    r = kiln_cli("inspect", tmp_path / "missing.kiln", check=False)
    assert r.returncode == 1 and "cannot open" in r.stderr
    garbage = tmp_path / "garbage.kiln"
    garbage.write_bytes(b"not a kiln file at all" * 10)
    r = kiln_cli("run", garbage, check=False)
    assert r.returncode == 1 and "corrupt kiln artifact" in r.stderr
    r = kiln_cli("run", folder / "net.kiln", "--device", "tpu", check=False)
    assert r.returncode == 2 and "--device" in r.stderr


def test_bad_npy_inputs(saved, tmp_path):
    _, _, folder, (x, scale) = saved
    np.save(tmp_path / "scale.npy", scale.numpy())
    np.save(tmp_path / "wrong.npy", np.zeros((2, 3, 4, 5), np.float32))
    r = kiln_cli("run", folder / "net.kiln", "--input", tmp_path / "wrong.npy", "--input", tmp_path / "scale.npy",
                 check=False)
    assert r.returncode == 1 and "input 0" in r.stderr and "[2, 3, 4, 5]" in r.stderr
    np.save(tmp_path / "x.npy", x.numpy())
    data = (tmp_path / "x.npy").read_bytes()
    (tmp_path / "short.npy").write_bytes(data[:-7])
    r = kiln_cli("run", folder / "net.kiln", "--input", tmp_path / "short.npy", "--input", tmp_path / "scale.npy",
                 check=False)
    assert r.returncode == 1 and "not a valid .npy file" in r.stderr
    (tmp_path / "junk.npy").write_bytes(b"\x93NUMPY\x01\x00\xff\xff{'descr'")
    r = kiln_cli("run", folder / "net.kiln", "--input", tmp_path / "junk.npy", "--input", tmp_path / "scale.npy",
                 check=False)
    assert r.returncode == 1 and "not a valid .npy file" in r.stderr
    r = kiln_cli("run", folder / "net.kiln", "--input", tmp_path / "scale.npy", check=False)
    assert r.returncode == 2 and "takes 2 input(s)" in r.stderr


def test_cuda_device_without_cuda(saved):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    _, _, folder, _ = saved
    for command in ("run", "bench"):
        r = kiln_cli(command, folder / "net.kiln", "--device", "cuda", check=False)
        assert r.returncode == 1 and "cuda:0" in r.stderr and "CUDA is not available" in r.stderr, r.stderr


@pytest.mark.skipif(not cuda_available(), reason="needs a GPU and kiln's CUDA backend")
def test_run_and_bench_on_cuda(tmp_path):
    torch.manual_seed(0)
    model = Net().cuda().eval()
    x, scale = torch.randn(2, 3, 4, 4, device="cuda"), torch.randn(1, 6, 1, 1, device="cuda")
    program = kiln.compile(model, [x, scale])
    expected = program(x, scale)
    kiln.save(program, tmp_path / "net.kiln")
    np.save(tmp_path / "x.npy", x.cpu().numpy())
    np.save(tmp_path / "scale.npy", scale.cpu().numpy())
    # The installed command finds the CUDA plugin in the package folder through its RUNPATH.
    kiln_cli("run", tmp_path / "net.kiln", "--device", "cuda", "--input", tmp_path / "x.npy", "--input",
             tmp_path / "scale.npy", "--out", tmp_path / "out")
    for i, want in enumerate(expected):  # another process may pick other cuBLASLt/cuDNN algorithms: f32 tolerance
        torch.testing.assert_close(torch.from_numpy(np.load(tmp_path / "out" / f"output_{i}.npy")), want.cpu())
    out = kiln_cli("bench", tmp_path / "net.kiln", "--device", "cuda", "--iters", "20", "--warmup", "2").stdout
    assert "20 calls after 2 warmup" in out and "p50" in out
