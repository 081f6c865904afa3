"""kiln.save / kiln.load: a program from kiln.compile (or a model compiled
with torch.compile(backend="kiln")) saved to one file and loaded back gives
the same outputs bit for bit on CPU, with its weights stored (mapped at load)
or left out and re-bound from a state dict or a safetensors file; programs
that cannot be saved raise a clear error, and so do CUDA loads that cannot
run here. A program compiled for CUDA saves with its weights (copied from the
GPU) and loads on CUDA (bit for bit) and on CPU (within tolerance); those
tests skip without a GPU."""

import pytest
import torch

import kiln
from conftest import assert_close, cuda_available
from kiln.artifacts import UnsupportedProgram

needs_cuda = pytest.mark.skipif(not cuda_available(), reason="needs a GPU and kiln's CUDA backend")


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 32)
        self.fc2 = torch.nn.Linear(32, 5)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class CNN(torch.nn.Module):
    def __init__(self, batch_norm=True):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8) if batch_norm else torch.nn.Identity()
        self.conv2 = torch.nn.Conv2d(8, 4, 3, stride=2)
        self.fc = torch.nn.Linear(4 * 3 * 3, 6)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv1(x)))
        h = torch.relu(self.conv2(h))
        return self.fc(h.flatten(1)), h


def _model(cls, *args):
    torch.manual_seed(0)
    m = cls(*args).eval()
    with torch.no_grad():  # non-trivial batch-norm statistics
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
    return m


def _same(a, b):
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
        return
    assert a.dtype == b.dtype and a.shape == b.shape
    assert torch.equal(a.view(torch.uint8) if a.dtype != torch.bool else a, b.view(torch.uint8) if b.dtype != torch.bool else b)


@pytest.mark.parametrize("cls,shape", [(MLP, (4, 12)), (CNN, (2, 3, 8, 8))])
def test_save_load_bit_exact(tmp_path, cls, shape):
    model = _model(cls)
    x = torch.randn(shape)
    program = kiln.compile(model, [x])
    expected = program(x)
    path = tmp_path / "model.kiln"
    kiln.save(program, path)
    loaded = kiln.load(path)
    _same(loaded(x), expected)
    x2 = torch.randn(shape)
    _same(loaded(x2), program(x2))


def test_save_before_first_call(tmp_path):
    model = _model(CNN)
    x = torch.randn(2, 3, 8, 8)
    program = kiln.compile(model, [x])
    kiln.save(program, tmp_path / "m.kiln")  # binds and folds what the program reads
    _same(kiln.load(tmp_path / "m.kiln")(x), program(x))


@pytest.mark.parametrize("cls,shape", [(MLP, (4, 12)), (CNN, (2, 3, 8, 8))])
def test_weightless_save_rebinds_state_dict(tmp_path, cls, shape):
    model = _model(cls, *([False] if cls is CNN else []))
    x = torch.randn(shape)
    program = kiln.compile(model, [x])
    expected = program(x)
    path = tmp_path / "bare.kiln"
    kiln.save(program, path, weights=False)
    assert path.stat().st_size < 4096
    with pytest.raises(ValueError, match="holds no data"):
        kiln.load(path)
    loaded = kiln.load(path, weights=model.state_dict())
    _same(loaded(x), expected)
    # Other weights of the same shapes give the eager model's answers for them.
    other = _model(cls, *([False] if cls is CNN else []))
    with torch.no_grad():
        for p in other.parameters():
            p.mul_(0.5)
    got = kiln.load(path, weights=other.state_dict())(x)
    want = other(x)
    for g, w in zip(got if isinstance(got, (list, tuple)) else [got], want if isinstance(want, (list, tuple)) else [want]):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)


def test_weightless_save_with_folds_is_refused(tmp_path):
    model = _model(CNN)
    x = torch.randn(2, 3, 8, 8)
    program = kiln.compile(model, [x])
    with pytest.raises(UnsupportedProgram, match="folded constants"):
        kiln.save(program, tmp_path / "x.kiln", weights=False)


def test_unsupported_programs(tmp_path):
    with pytest.raises(UnsupportedProgram, match="kiln.compile"):
        kiln.save(_model(MLP), tmp_path / "x.kiln")

    class WithFallback(torch.nn.Module):
        def forward(self, x):
            return torch.sort(x, dim=-1).values * 2

    if kiln._kiln.has_aten("aten.sort.default"):
        pytest.skip("sort is lowered by kiln; no fallback op to test with")
    x = torch.randn(3, 7)
    program = kiln.compile(WithFallback(), [x])
    with pytest.raises(UnsupportedProgram, match="fallback"):
        kiln.save(program, tmp_path / "y.kiln")


def test_corrupt_file_is_a_clear_error(tmp_path):
    model = _model(MLP)
    x = torch.randn(4, 12)
    program = kiln.compile(model, [x])
    path = tmp_path / "m.kiln"
    kiln.save(program, path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    bad = tmp_path / "bad.kiln"
    bad.write_bytes(bytes(data))
    with pytest.raises(kiln.Error, match="corrupt kiln artifact"):
        kiln.load(bad)
    bad.write_bytes(bytes(data[:100]))
    with pytest.raises(kiln.Error, match="truncated"):
        kiln.load(bad)


@pytest.mark.parametrize("cls,shape", [(MLP, (4, 12)), (CNN, (2, 3, 8, 8))])
def test_weightless_save_rebinds_safetensors(tmp_path, cls, shape):
    from safetensors.torch import save_file

    model = _model(cls, *([False] if cls is CNN else []))
    x = torch.randn(shape)
    program = kiln.compile(model, [x])
    expected = program(x)
    kiln.save(program, tmp_path / "bare.kiln", weights=False)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, tmp_path / "w.safetensors")
    _same(kiln.load(tmp_path / "bare.kiln", weights=tmp_path / "w.safetensors")(x), expected)
    _same(kiln.load(tmp_path / "bare.kiln", weights=str(tmp_path / "w.safetensors"))(x), expected)
    (tmp_path / "bad.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    with pytest.raises(ValueError, match="bad.safetensors"):
        kiln.load(tmp_path / "bare.kiln", weights=tmp_path / "bad.safetensors")


@pytest.mark.parametrize("cls,shape", [(MLP, (4, 12)), (CNN, (2, 3, 8, 8))])
def test_torch_compile_model_saves_bit_exact(tmp_path, cls, shape):
    model = _model(cls)
    x = torch.randn(shape)
    compiled = torch.compile(model, backend="kiln")
    with torch.no_grad():
        expected = compiled(x)
    kiln.save(compiled, tmp_path / "tc.kiln", example_inputs=(x,))
    loaded = kiln.load(tmp_path / "tc.kiln")
    _same(loaded(x), expected)
    x2 = torch.randn(shape)
    with torch.no_grad():
        _same(loaded(x2), compiled(x2))


def test_torch_compile_save_needs_example_inputs_and_one_graph(tmp_path):
    compiled = torch.compile(_model(MLP), backend="kiln")
    with pytest.raises(UnsupportedProgram, match="example_inputs"):
        kiln.save(compiled, tmp_path / "x.kiln")

    class DataDependent(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # a graph break under Dynamo; torch.export refuses it
                return x * 2
            return x - 1

    with pytest.raises(UnsupportedProgram, match="one graph"):
        kiln.save(torch.compile(DataDependent(), backend="kiln"), tmp_path / "y.kiln",
                  example_inputs=(torch.randn(3),))
    assert not (tmp_path / "y.kiln").exists()


def test_cuda_load_without_cuda_is_a_clear_error(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    program = kiln.compile(_model(MLP), [torch.randn(4, 12)])
    kiln.save(program, tmp_path / "m.kiln")
    with pytest.raises(kiln.Error, match="CUDA is not available"):
        kiln.load(tmp_path / "m.kiln", device="cuda")


@needs_cuda
@pytest.mark.parametrize("cls,shape,dtype", [(MLP, (4, 12), torch.float32), (CNN, (2, 3, 8, 8), torch.float16)])
def test_cuda_save_with_weights_loads_on_cuda_and_cpu(tmp_path, cls, shape, dtype):
    # f16 convolutions run channels-last on CUDA (a layout chosen for the GPU, with
    # re-laid-out weights as folded constants); the CPU runs that graph too.
    model = _model(cls, *([False] if cls is CNN else [])).to("cuda", dtype)
    x = torch.randn(shape, device="cuda", dtype=dtype)
    program = kiln.compile(model, [x])
    expected = program(x)
    path = tmp_path / "model.kiln"
    kiln.save(program, path)
    on_cuda = kiln.load(path, device="cuda")
    assert on_cuda.metadata["device"] == "cuda:0"
    _same(on_cuda(x), expected)
    x2 = torch.randn(shape, device="cuda", dtype=dtype)
    _same(on_cuda(x2), program(x2))
    on_cpu = kiln.load(path, device="cpu")
    cpu = lambda t: [o.cpu() for o in t] if isinstance(t, (list, tuple)) else t.cpu()  # noqa: E731
    assert_close(cpu(on_cpu(x.cpu())), cpu(expected), dtype)
