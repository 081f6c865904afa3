"""Convolutions (cuDNN), pooling, batch norm and GEMM epilogues (cuBLASLt) on
CUDA against eager in f32/f16/bf16, the NHWC layout pass, and torchvision
CNNs in fp16 with no convolution left to PyTorch. The CUDA tests skip without
a GPU and kiln's CUDA backend; the CPU tests check that the IR forms the new
passes make (conv2d_fused, channels-last pools, matmul_epilogue) give the
same results on the CPU reference."""

import functools
import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kiln
from conftest import assert_close, cuda_available, no_tf32
from kiln import _kiln
from kiln.dynamo_backend import kiln_backend

needs_cuda = pytest.mark.skipif(not cuda_available(), reason="needs a GPU and kiln's CUDA backend")
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
IR_DIR = Path(__file__).resolve().parents[1] / "ir"


def compile_cuda(model, inputs, dtype, atol_scale=False):
    """Compiles with kiln on CUDA, compares with eager, returns the fallback decisions."""
    reports = []
    compiled = torch.compile(model, backend=functools.partial(kiln_backend, reports=reports))
    with no_tf32(), torch.inference_mode():
        expected = model(*inputs)
        got = compiled(*inputs)
        torch.cuda.synchronize()
    overrides = {}
    if atol_scale:  # deep fp16 nets: tolerance relative to the output's scale
        overrides["atol"] = 3e-2 * max(1.0, expected.abs().max().item())
    assert_close(got, expected, dtype=dtype, **overrides)
    assert any(r.lowered for r in reports)
    return [d for r in reports for d in r.fallbacks]


# ---- CPU: the new IR forms keep the reference's results ----------------------


def run_cpu(graph, inputs, weights):
    exe = kiln.compile_graph(graph)
    for key, w in weights.items():
        exe.bind_weight(key, w)
    outs = [torch.empty(shape, dtype=getattr(torch, {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}[dt]))
            for dt, shape, _ in exe.output_types()]
    exe.run(inputs, outs)
    return outs, exe._native.graph_text()


@pytest.mark.parametrize("case", ["residual_block", "boundaries", "identity_input"])
def test_choose_layout_keeps_cpu_results(case):
    text = (IR_DIR / "choose_layout" / f"{case}.before.txt").read_text()
    plain = kiln.Graph.parse(text)
    nhwc = kiln.Graph.parse(text)
    assert _kiln.choose_layout(nhwc)
    assert "channels_last=true" in nhwc.text()
    torch.manual_seed(0)
    dt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
    inputs, weights = [], {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0] in ("input", "weight"):
            dtype, shape = parts[3].split("[")
            t = torch.randn([int(s) for s in shape.rstrip("]").split(",")]).to(dt[dtype])
            if parts[0] == "input":
                inputs.append(t)
            else:
                weights[parts[1].lstrip("%")] = t
    want, _ = run_cpu(plain, inputs, weights)
    got, program = run_cpu(nhwc, inputs, weights)
    assert "channels_last=true" in program
    for g, w in zip(got, want):
        assert_close(g, w)


def test_matmul_epilogue_on_cpu_matches_unfused():
    rng = np.random.default_rng(0)
    g = kiln.Graph()
    x = g.input("x", "f32", [5, 8])
    w = g.weight("w", "f32", [16, 8])
    b = g.weight("b", "f32", [16])
    y = g.op("matmul", [x, g.op("permute", [w], {"dims": [1, 0]})[0]])[0]
    g.set_outputs([g.op("gelu", [g.op("add", [y, b])[0]])[0]])
    exe = kiln.compile_graph(g)
    assert "matmul_epilogue" in exe._native.graph_text()
    xs, ws, bs = (rng.standard_normal(s, dtype=np.float32) for s in [(5, 8), (16, 8), (16,)])
    exe.bind_weight("w", ws)
    exe.bind_weight("b", bs)
    (out,) = exe(xs)
    want = F.gelu(torch.from_numpy(xs) @ torch.from_numpy(ws).T + torch.from_numpy(bs)).numpy()
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_residual_epilogue_on_cpu_matches_unfused(dtype):
    """A linear layer on a 3-D input plus that input (a transformer block's skip connection): the
    bias and the residual go into one matmul_epilogue, and the CPU result is the unfused graph's,
    bit for bit (the fused kernel rounds after the bias and after the residual, as the adds do)."""

    def block():
        g = kiln.Graph()
        x = g.input("x", dtype, [2, 5, 16])
        w = g.weight("w", dtype, [16, 16])
        b = g.weight("b", dtype, [16])
        rows = g.op("reshape", [x], {"shape": [10, 16]})[0]
        y = g.op("matmul", [rows, g.op("permute", [w], {"dims": [1, 0]})[0]])[0]
        y = g.op("reshape", [y], {"shape": [2, 5, 16]})[0]
        g.set_outputs([g.op("add", [g.op("add", [y, b])[0], x])[0]])
        return g

    torch.manual_seed(0)
    tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    x, w, b = (torch.randn(s).to(tdt) for s in [(2, 5, 16), (16, 16), (16,)])
    fused, plain = kiln.compile_graph(block()), kiln.compile_graph(block(), optimize=False)
    text = fused.describe()
    assert text.count("matmul_epilogue(") == 1 and "add(" not in text, text
    outs = []
    for exe in (fused, plain):
        exe.bind_weight("w", w)
        exe.bind_weight("b", b)
        outs.append(torch.empty(2, 5, 16, dtype=tdt))
        exe.run([x], outs[-1:])
    assert torch.equal(outs[0], outs[1])


def test_cpu_conv_matches_torch_across_window_geometries():
    """The CPU convolution's im2col (padding runs, strided and dilated columns, images narrower than
    the kernel's reach) against torch over a sweep of kernel, stride, padding, dilation and width."""
    rng = np.random.default_rng(0)
    cases = 0
    for k, s, p, d, w in itertools.product([1, 3, 5], [1, 2, 3], [0, 1, 3], [1, 2], [1, 4, 9]):
        out_h, out_w = (w + 1 + 2 * p - d * (k - 1) - 1) // s + 1, (w + 2 * p - d * (k - 1) - 1) // s + 1
        if out_h < 1 or out_w < 1:
            continue
        g = _kiln.Graph.parse(f"""graph {{
  input %x : f32[1,3,{w + 1},{w}]
  weight %wt : f32[4,3,{k},{k}] = "wt"
  %y = conv2d(%x, %wt) {{dilation=[{d},{d}], groups=1, padding=[{p},{p}], stride=[{s},{s}]}} : f32[1,4,{out_h},{out_w}]
  return %y
}}""")
        exe = kiln.compile_graph(g)
        x = rng.standard_normal((1, 3, w + 1, w), dtype=np.float32)
        wt = rng.standard_normal((4, 3, k, k), dtype=np.float32)
        exe.bind_weight("wt", wt)
        (got,) = exe(x)
        want = F.conv2d(torch.from_numpy(x), torch.from_numpy(wt), stride=s, padding=p, dilation=d).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4, err_msg=f"k{k} s{s} p{p} d{d} w{w}")
        cases += 1
    assert cases > 100


class PatchEmbed(torch.nn.Module):
    """A patch convolution read as tokens (a view of its channels-last result) and flattened whole
    (which needs NCHW again), as ViT and a ConvNeXt-like stem use it."""

    def __init__(self, cin=3, cout=8, patch=4, bias=True):
        super().__init__()
        self.conv = torch.nn.Conv2d(cin, cout, patch, stride=patch, bias=bias)

    def forward(self, x):
        y = self.conv(x)
        return torch.relu(y.flatten(2).transpose(1, 2)), y.flatten(1) * 2


def kernel_ops(model, inputs):
    """The ops of the kernels kiln runs for `model` (its optimized graphs), and its outputs."""
    reports = []
    compiled = torch.compile(model, backend=functools.partial(kiln_backend, reports=reports))
    with no_tf32(), torch.inference_mode():
        got = compiled(*inputs)
    assert all(not r.fallbacks for r in reports), [str(r) for r in reports]
    return got, "".join(region.exe.describe() for r in reports for region in r.region_modules)


@pytest.mark.parametrize("bias", [True, False])
def test_patch_conv_is_a_product_on_cpu(bias):
    torch.manual_seed(0)
    model = PatchEmbed(bias=bias).eval()
    x = torch.randn(2, 3, 16, 12)
    got, text = kernel_ops(model, [x])
    with torch.inference_mode():
        expected = model(x)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
    assert "conv2d" not in text and "matmul" in text, text


# ---- CUDA: convolution variants, pooling, batch norm, epilogues --------------

CONV_CASES = {
    "plain": dict(cin=8, cout=16, k=3),
    "bias_relu": dict(cin=8, cout=16, k=3, padding=1, relu=True),
    "stride_pad": dict(cin=6, cout=10, k=3, stride=2, padding=1),
    "dilation": dict(cin=4, cout=8, k=3, dilation=2, padding=2),
    "groups": dict(cin=8, cout=12, k=3, groups=4, padding=1),
    "depthwise": dict(cin=16, cout=16, k=3, groups=16, padding=1, relu=True),
    "pointwise": dict(cin=32, cout=24, k=1, bias=False),
    "rect": dict(cin=3, cout=8, k=(5, 3), stride=(2, 1), padding=(2, 0)),
}


@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(CONV_CASES))
def test_conv_matches_eager(case, dtype):
    c = dict(CONV_CASES[case])
    relu, bias = c.pop("relu", False), c.pop("bias", True)
    cin, cout, k = c.pop("cin"), c.pop("cout"), c.pop("k")
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(cin, cout, k, bias=bias, **c)
    model = (torch.nn.Sequential(conv, torch.nn.ReLU()) if relu else conv).to("cuda", dtype).eval()
    x = torch.randn(2, cin, 13, 11, device="cuda", dtype=dtype)
    assert compile_cuda(model, [x], dtype) == []


@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("patch", [4, 16])
def test_patch_conv_matches_eager(patch, dtype):
    torch.manual_seed(0)
    model = PatchEmbed(patch=patch).to("cuda", dtype).eval()
    x = torch.randn(2, 3, 2 * patch, 3 * patch, device="cuda", dtype=dtype)
    got, text = kernel_ops(model, [x])
    with no_tf32(), torch.inference_mode():
        expected = model(x)
    for g, e in zip(got, expected):
        assert_close(g, e, dtype=dtype)
    assert "conv2d" not in text and "matmul" in text, text


@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "pool",
    [
        lambda x: F.max_pool2d(x, 3, stride=2, padding=1),
        lambda x: F.max_pool2d(x, 3, stride=2, padding=1, dilation=2, ceil_mode=True),
        lambda x: F.avg_pool2d(x, 3, stride=2, padding=1),
        lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False, ceil_mode=True),
        lambda x: F.avg_pool2d(x, 2, divisor_override=3),
        lambda x: F.adaptive_avg_pool2d(x, 1),
        lambda x: F.adaptive_avg_pool2d(x, (3, 2)),
    ],
    ids=["max", "max_dilated_ceil", "avg", "avg_no_pad_ceil", "avg_divisor", "global_avg", "adaptive"],
)
@pytest.mark.parametrize("after_conv", [False, True], ids=["alone", "after_conv"])
@pytest.mark.parametrize("channels", [6, 16], ids=["c6", "c16"])
def test_pool_matches_eager(pool, dtype, after_conv, channels):
    # After a convolution, f16/bf16 pools run channels-last in the conv chain: with 16 channels
    # through the 16-byte vector kernel, with 6 (not whole packs) through the general one.
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(4, channels, 3, padding=1).to("cuda", dtype)

    class Net(torch.nn.Module):
        def forward(self, x):
            return pool(conv(x) if after_conv else x)

    x = torch.randn(2, 4, 11, 9, device="cuda", dtype=dtype)
    assert compile_cuda(Net().eval(), [x], dtype) == []


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_channels_last_max_pool_propagates_nan_and_is_exact(dtype):
    """The vector max pool keeps torch's rules: NaN wins, otherwise the exact maximum. The reference
    pools kiln's own convolution output (the same cuDNN plan), so any difference is the pool's."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 32, 3, padding=1).to("cuda", dtype).eval()
    pool = torch.nn.MaxPool2d(3, stride=2, padding=1)
    x = torch.randn(2, 3, 20, 18, device="cuda", dtype=dtype)
    x[0, 1, 4, 7] = float("nan")
    x[1, :, 10:, :] = 0  # flat regions: ties between window elements
    with torch.inference_mode():
        expected = pool(torch.compile(conv, backend="kiln")(x))
        got = torch.compile(torch.nn.Sequential(conv, pool), backend="kiln")(x)
    assert expected.isnan().any()
    assert torch.equal(got.isnan(), expected.isnan())
    assert torch.equal(got.nan_to_num(), expected.nan_to_num())


@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_batch_norm_matches_eager(dtype):
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(6)
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-1, 1)
    model = torch.nn.Sequential(torch.nn.ReLU(), bn).to("cuda", dtype).eval()  # no conv to fold into
    x = torch.randn(3, 6, 7, 5, device="cuda", dtype=dtype)
    assert compile_cuda(model, [x], dtype) == []


@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", [None, torch.nn.ReLU, torch.nn.GELU, functools.partial(torch.nn.GELU, "tanh")],
                         ids=["bias", "relu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("shape", [(7, 64), (2, 5, 64)], ids=["2d", "batched"])
def test_linear_epilogue_matches_eager(dtype, act, shape):
    torch.manual_seed(0)
    layers = [torch.nn.Linear(64, 96)] + ([act()] if act else [])
    model = torch.nn.Sequential(*layers).to("cuda", dtype).eval()
    x = torch.randn(*shape, device="cuda", dtype=dtype)
    assert compile_cuda(model, [x], dtype) == []


class BasicBlock(torch.nn.Module):
    """ResNet's basic block: relu(bn(conv(relu(bn(conv(x))))) + identity); the identity is x itself, or a
    strided 1x1 convolution with its batch norm when the block downsamples."""

    def __init__(self, cin=8, cout=8, stride=1):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 1, stride, bias=False), torch.nn.BatchNorm2d(cout))
        for bn in (m for m in self.modules() if isinstance(m, torch.nn.BatchNorm2d)):  # not the identity transform
            torch.nn.init.uniform_(bn.weight, 0.5, 1.5)
            torch.nn.init.uniform_(bn.bias, -0.5, 0.5)
            bn.running_mean.uniform_(-0.2, 0.2)
            bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + (x if self.down is None else self.down(x)))


def _residual_convs(text: str) -> int:
    """How many conv2d_fused nodes of the optimized graphs take a residual (a fourth operand)."""
    return sum(1 for line in text.splitlines() if "= conv2d_fused(" in line and line.split("(", 1)[1].count("%") == 4)


@pytest.mark.parametrize("stride", [1, 2])
def test_resnet_block_residual_fuses_into_the_convolution_on_cpu(stride):
    """The skip connection's add and the ReLU after it become the last convolution's epilogue
    (conv2d_fused with a residual operand), with eager's results on the CPU."""
    torch.manual_seed(0)
    model = BasicBlock(8, 16 if stride == 2 else 8, stride).eval()
    x = torch.randn(2, 8, 10, 9)
    reports = []
    compiled = torch.compile(model, backend=functools.partial(kiln_backend, reports=reports))
    with torch.no_grad():
        expected, got = model(x), compiled(x)
    assert_close(got, expected, torch.float32)
    texts = [r.exe._native.graph_text() for g in reports for r in g.region_modules]
    assert sum(_residual_convs(t) for t in texts) == 1 and not any(" add(" in t for t in texts), texts


@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("stem", [False, True], ids=["block", "stem_and_block"])
def test_resnet_block_residual_matches_eager(stem, stride, dtype):
    # With a stem convolution first (as in a ResNet) the block's identity is a channels-last value of the
    # f16/bf16 chain; without, it is the graph's NCHW input, which the chain reads through the conversion
    # it makes for the first convolution (choose_layout's entering values).
    torch.manual_seed(0)
    model = BasicBlock(8, 16 if stride == 2 else 8, stride)
    if stem:
        model = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, 1, 1), torch.nn.ReLU(), model)
    model = model.to("cuda", dtype).eval()
    x = torch.randn(2, 8, 10, 9, device="cuda", dtype=dtype)
    assert compile_cuda(model, [x], dtype) == []
    _, text = kernel_ops(model, [x])
    assert "residual" in text and "cuda add" not in text, text


class LinearResidual(torch.nn.Module):
    """A transformer block's skip connection: fc(x) + x."""

    def __init__(self, width=64):
        super().__init__()
        self.fc = torch.nn.Linear(width, width)

    def forward(self, x):
        return self.fc(x) + x


@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_residual_matches_eager(dtype):
    torch.manual_seed(0)
    model = LinearResidual().to("cuda", dtype).eval()
    x = torch.randn(2, 5, 64, device="cuda", dtype=dtype)
    assert compile_cuda(model, [x], dtype) == []
    _, text = kernel_ops(model, [x])
    assert "residual as C" in text and "add(" not in text, text


@needs_cuda
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small"])
def test_torchvision_fp16_has_no_conv_fallbacks(name):
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)().to("cuda", torch.float16).eval()
    x = torch.randn(2, 3, 128, 128, device="cuda", dtype=torch.float16)
    fallbacks = compile_cuda(model, [x], torch.float16, atol_scale=True)
    convs = [d for d in fallbacks if "conv" in d.target]
    assert convs == [], "\n".join(f"{d.target}: {d.reason}" for d in convs)
