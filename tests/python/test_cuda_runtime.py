"""kiln's CUDA runtime: fused elementwise groups as NVRTC-generated kernels
(against eager and kiln's CPU reference), the on-disk kernel cache, CUDA-graph
replay (new addresses, in-place weight updates), memory from torch's caching
allocator, and calls from several threads on several streams. Skips without
a GPU and kiln's CUDA plugin; run on the GPU machine (scripts/gpu_check.sh)."""

import ctypes
import functools
import pathlib
import threading

import pytest
import torch

import kiln
from conftest import assert_close, cuda_available
from kiln.dynamo_backend import kiln_backend

needs_cuda = pytest.mark.skipif(not cuda_available(), reason="needs a GPU and kiln's CUDA backend")


def test_torch_allocator_gives_real_memory_while_compiling_with_fake_tensors():
    # kiln compiles (and allocates its literals and workspaces) inside
    # AOTAutograd's compiler call, where torch.empty would make fake tensors.
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    from kiln.executable import torch_allocator

    allocate = torch_allocator("cpu")
    with FakeTensorMode():
        assert isinstance(torch.empty(4), FakeTensor)
        address, owner = allocate(1000, 64)
    assert not isinstance(owner, FakeTensor)
    assert address % 64 == 0
    assert owner.data_ptr() <= address and address + 1000 <= owner.data_ptr() + owner.numel()


def plugin():
    lib = ctypes.CDLL(str(pathlib.Path(kiln.__file__).parent / "libkiln_cuda.so"))
    lib.kiln_cuda_kernel_cache_stats.argtypes = [ctypes.POINTER(ctypes.c_int64)]
    return lib


def cache_stats():
    out = (ctypes.c_int64 * 5)()
    plugin().kiln_cuda_kernel_cache_stats(out)
    return dict(zip(["nvrtc_compiles", "memory_hits", "disk_hits", "disk_rejects", "disk_writes"], out))


def compile_with_reports(fn, **options):
    reports = []
    return torch.compile(fn, backend=functools.partial(kiln_backend, reports=reports, **options)), reports


def test_python_allocator_feeds_the_arena_and_is_released():
    # The allocator path is the same on every device; on the CPU it runs here.
    import gc
    import weakref

    from kiln import _kiln
    from kiln.executable import Executable

    graph = _kiln.Graph.parse(
        """graph {
  input %x : f32[64,64]
  %a = exp(%x) : f32[64,64]
  %b = matmul(%a, %x) : f32[64,64]
  %c = add(%b, %x) : f32[64,64]
  return %c
}"""
    )
    owners = []

    def allocate(nbytes, alignment):
        t = torch.empty(nbytes, dtype=torch.uint8)
        owners.append(weakref.ref(t))
        return t.data_ptr(), t

    exe = Executable(_kiln.compile(graph, "cpu", True, allocate, True))
    x = torch.randn(64, 64)
    (out,) = exe(x.numpy())
    assert_close(torch.from_numpy(out), (x.exp() @ x) + x)
    if exe.arena_bytes():
        assert owners and all(o() is not None for o in owners)  # kept alive while kiln holds the memory
        assert any(o().data_ptr() == exe.arena_address() for o in owners)
    del exe
    gc.collect()
    assert all(o() is None for o in owners)  # and released with the executable


def executables(reports):
    return [region.exe for r in reports for region in r.region_modules]


def fused_chain(x, b, t):
    # broadcast (b), strided (t is a transposed view), several outputs
    h = torch.tanh(x * 0.5 + b)
    return h * torch.sigmoid(t.transpose(0, 1)), h - 1.0


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_fused_groups_match_eager_and_the_cpu_reference(dtype, tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    x = torch.randn(64, 96, dtype=dtype)
    b = torch.randn(96, dtype=dtype)
    t = torch.randn(96, 64, dtype=dtype)
    before = cache_stats()["nvrtc_compiles"]
    gpu, reports = compile_with_reports(fused_chain)
    cpu = torch.compile(fused_chain, backend=kiln_backend)
    with torch.inference_mode():
        got = gpu(x.cuda(), b.cuda(), t.cuda())
        expected = fused_chain(x.cuda(), b.cuda(), t.cuda())
        reference = cpu(x, b, t)
    torch.cuda.synchronize()
    assert_close(list(got), list(expected), dtype=dtype)
    assert_close([g.cpu() for g in got], list(reference), dtype=dtype)
    assert cache_stats()["nvrtc_compiles"] > before  # a generated kernel, compiled by NVRTC
    assert any("cuda fused (nvrtc" in exe.describe() for exe in executables(reports))


@needs_cuda
@pytest.mark.parametrize("shape", [(7, 5), (4, 8, 33)])  # odd sizes: no vector kernel; misaligned rows
def test_fused_groups_with_odd_shapes_and_unaligned_inputs(shape):
    torch.manual_seed(0)
    x = torch.randn(*shape, device="cuda", dtype=torch.float16)
    base = torch.randn(x.numel() + 1, device="cuda", dtype=torch.float16)
    y = base[1:].view(shape)  # 2 bytes past an aligned address
    fn = lambda a, c: torch.relu(a * c + 1.0)  # noqa: E731
    compiled = torch.compile(fn, backend=kiln_backend)
    with torch.inference_mode():
        assert_close(compiled(x, y), fn(x, y), dtype=torch.float16)


@needs_cuda
def test_second_compile_of_a_model_reads_the_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    x = torch.randn(32, 48, device="cuda")
    b = torch.randn(48, device="cuda")
    t = torch.randn(48, 32, device="cuda") * 1.25  # values unlike the other tests' so the source is new
    fn = lambda x, b, t: fused_chain(x, b * 1.25, t)  # noqa: E731
    with torch.inference_mode():
        first = torch.compile(fn, backend=kiln_backend)(x, b, t)
        after_first = cache_stats()
        assert list(tmp_path.glob("*.cubin")), "nothing was written to the disk cache"
        plugin().kiln_cuda_kernel_cache_forget()
        torch._dynamo.reset()
        second = torch.compile(fn, backend=kiln_backend)(x, b, t)
    after_second = cache_stats()
    assert after_second["nvrtc_compiles"] == after_first["nvrtc_compiles"]
    assert after_second["disk_hits"] > after_first["disk_hits"]
    assert_close(list(second), list(first))


@needs_cuda
def test_corrupt_cache_files_are_ignored_and_rewritten(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    fn = lambda x: torch.sigmoid(x * 3.5) + 0.25  # noqa: E731
    x = torch.randn(16, 16, device="cuda")
    with torch.inference_mode():
        torch.compile(fn, backend=kiln_backend)(x)
        files = list(tmp_path.glob("*.cubin"))
        assert files
        for f in files:
            f.write_bytes(f.read_bytes()[:40])  # truncated
        plugin().kiln_cuda_kernel_cache_forget()
        torch._dynamo.reset()
        before = cache_stats()
        got = torch.compile(fn, backend=kiln_backend)(x)
    after = cache_stats()
    assert after["nvrtc_compiles"] > before["nvrtc_compiles"]
    assert after["disk_rejects"] > before["disk_rejects"]
    assert all(f.stat().st_size > 40 for f in files)
    assert_close(got, fn(x))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(64, 64)

    def forward(self, x):
        return torch.nn.functional.gelu(self.fc(x)) + x


@needs_cuda
def test_graph_replay_equals_eager_and_follows_new_addresses_and_weight_updates():
    torch.manual_seed(0)
    model = Block().cuda().eval()
    compiled, reports = compile_with_reports(model)
    xs = [torch.randn(8, 64, device="cuda") for _ in range(6)]  # six input addresses, kept alive
    with torch.inference_mode():
        for _ in range(2):
            for x in xs:  # eager first call, then captures, then (past 4 graphs) updates or slots
                assert_close(compiled(x), model(x))
        (exe,) = executables(reports)
        stats = exe.call_stats()
        assert stats["uncaptured_reason"] == ""
        assert stats["graph_replays"] == stats["calls"] - 1 == 11
        # four kept graphs and at most one on the static slots; the first call past them updates one
        assert 1 <= stats["graph_captures"] <= 5 and stats["graph_updates"] >= 1
        model.fc.weight.mul_(-0.5)  # in place: same address, new values
        model.fc.bias.add_(1.0)
        for x in xs[:2]:
            assert_close(compiled(x), model(x))
        replays = exe.call_stats()["graph_replays"]
        y = compiled(xs[0])
        y2 = compiled(xs[0])  # same pointers but one: the output address
        assert_close(y, model(xs[0]))
        assert_close(y2, model(xs[0]))
    stats = exe.call_stats()
    assert stats["graph_replays"] == replays + 2
    assert "CUDA graphs on" in exe.describe()


@needs_cuda
def test_cuda_many_input_addresses_past_the_kept_graphs_match_eager():
    # Twelve input addresses in turn: four kept graphs, then updates or static slots (runtime/executable.h).
    torch.manual_seed(0)
    model = Block().cuda().eval()
    compiled, reports = compile_with_reports(model)
    xs = [torch.randn(8, 64, device="cuda") for _ in range(12)]
    with torch.inference_mode():
        for _ in range(3):
            for x in xs:
                assert_close(compiled(x), model(x))
        (exe,) = executables(reports)
        stats = exe.call_stats()
        assert stats["uncaptured_reason"] == ""
        assert stats["graph_replays"] == stats["calls"] - 1 == 35
        assert stats["graph_updates"] >= 1  # the first call past the kept graphs updates one, timing it
        assert stats["graph_captures"] <= 5  # four kept, and at most one on the slots
        model.fc.weight.mul_(-0.5)  # in place: every path reads the new values
        for x in xs:
            assert_close(compiled(x), model(x))


@needs_cuda
@pytest.mark.parametrize("layout", ["transposed", "channels_last"])
def test_cuda_static_slots_keep_a_strided_input_layout(layout):
    # Forced through the slots: each call's input is copied into a slot of the same layout (not packed).
    torch.manual_seed(0)
    if layout == "transposed":
        model = torch.nn.Linear(64, 32).cuda().eval()
        xs = [torch.randn(64, 8, device="cuda").t() for _ in range(8)]
    else:
        model = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU()).cuda().half().eval()
        xs = [torch.randn(2, 8, 16, 16, device="cuda").half().to(memory_format=torch.channels_last) for _ in range(8)]
    compiled, reports = compile_with_reports(model, options={"cuda_graph_new_addresses": "slots"})
    with torch.inference_mode():
        for x in xs:
            assert_close(compiled(x), model(x))
        (exe,) = executables(reports)
        assert exe.input_types()[0][2] != list(torch.empty(xs[0].shape).stride())  # planned strided, not packed
        assert exe.call_stats()["slot_calls"] >= 3


@needs_cuda
def test_cuda_graphs_option_off_runs_eagerly():
    torch.manual_seed(0)
    model = Block().cuda().eval()
    compiled, reports = compile_with_reports(model, options={"cuda_graphs": False})
    with torch.inference_mode():
        for _ in range(3):
            x = torch.randn(8, 64, device="cuda")
            assert_close(compiled(x), model(x))
    (exe,) = executables(reports)
    assert exe.call_stats()["graph_replays"] == 0
    assert "CUDA graphs off" in exe.describe()


@needs_cuda
@pytest.mark.parametrize("allow", [False, True])
def test_f32_matmul_uses_tf32_exactly_when_torch_allows_it(allow, monkeypatch):
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", allow)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Linear(256, 64)).cuda().eval()
    compiled, reports = compile_with_reports(model)
    x = torch.randn(32, 256, device="cuda")
    with torch.inference_mode():
        got, want = compiled(x), model(x)  # eager under the same switch
    (exe,) = executables(reports)
    assert ("(tf32)" in exe.describe()) == allow and ("math tf32_matmul" in exe.describe()) == allow
    # TF32 keeps 10 mantissa bits: within its rounding of eager's own TF32 result, and f32 tight otherwise.
    torch.testing.assert_close(got, want, atol=2e-2 if allow else 1e-4, rtol=2e-2 if allow else 1e-4)


@needs_cuda
def test_arena_comes_from_torchs_allocator():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)).cuda().eval()
    x = torch.randn(256, 512, device="cuda")
    compiled, reports = compile_with_reports(model, options={"fold": "none"})
    with torch.inference_mode():
        torch.cuda.synchronize()
        start = torch.cuda.memory_allocated()
        out = compiled(x)  # compiles, then the first call allocates the arena
        torch.cuda.synchronize()
        grown = torch.cuda.memory_allocated() - start - out.numel() * out.element_size()
    (exe,) = executables(reports)
    arena = exe.arena_bytes()
    assert arena >= 256 * 2048 * 4
    kiln_held = arena + (32 << 20)  # the activation arena and the GEMM workspace, both from torch
    assert kiln_held <= grown <= kiln_held + (1 << 20), (grown, arena)
    del exe, compiled, reports, out
    import gc

    torch._dynamo.reset()
    gc.collect()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() - start <= grown - kiln_held  # both went back to torch


@needs_cuda
def test_eight_threads_on_eight_streams_give_correct_outputs():
    torch.manual_seed(0)
    model = Block().cuda().eval()
    compiled = torch.compile(model, backend=kiln_backend)
    threads_n, calls = 8, 1000
    inputs = [torch.randn(8, 64, device="cuda") for _ in range(threads_n)]
    with torch.inference_mode():
        expected = [model(x) for x in inputs]
        compiled(inputs[0])  # compile once, on this thread
    torch.cuda.synchronize()
    errors = []

    def worker(k):
        stream = torch.cuda.Stream()
        try:
            with torch.inference_mode(), torch.cuda.stream(stream):
                outs = [compiled(inputs[k]) for _ in range(calls)]
            stream.synchronize()
            for out in outs:
                torch.testing.assert_close(out, expected[k], atol=1e-4, rtol=1e-4)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(threads_n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[0]
