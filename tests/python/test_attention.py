"""Attention through kiln's `attention` op: every SDPA form (plain, causal,
bool and additive masks, explicit scale, grouped-query heads) compiled with
backend="kiln" and compared with eager, with kiln.explain showing that the
attention became one `attention` op (the fuse_attention pass on CPU, where
core ATen decomposes SDPA into bmm/softmax/bmm) and that nothing fell back.
Every SDPA overload (including the CUDA-only ones, whose adapters are
exercised on CPU through hand-built ATen graphs), BERT- and GPT-2-like
blocks, and on a GPU the flash kernel over dtypes, head dims and lengths."""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kiln
from kiln import _kiln
from kiln.dynamo_backend import kiln_backend

from conftest import assert_close, compile_and_report, cuda_available

aten = torch.ops.aten
f16, bf16, f32 = torch.float16, torch.bfloat16, torch.float32
# Attention sums over keys; low-precision tolerances a bit above conftest's elementwise ones.
TOL = {f32: dict(atol=2e-4, rtol=2e-4), f16: dict(atol=3e-2, rtol=3e-2), bf16: dict(atol=1e-1, rtol=8e-2)}


def _qkv(b, h, sq, sk, e, dtype, device="cpu", hk=None, ev=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, sq, e, generator=g)
    k = torch.randn(b, hk or h, sk, e, generator=g)
    v = torch.randn(b, hk or h, sk, ev or e, generator=g)
    return [t.to(device, dtype) for t in (q, k, v)]



def _kiln_ops(report):
    """Op counts of the kernels the compiled (optimized) kiln graphs run, after fuse_attention."""
    ops = {}
    for g in report.graphs:
        for region in g.region_modules:
            for op in re.findall(r"= (\w+)\(", region.exe.describe()):
                ops[op] = ops.get(op, 0) + 1
    return ops


def _check_fused(report, expect_attention=1):
    assert not report.fallbacks, str(report)
    ops = _kiln_ops(report)
    assert ops.get("attention", 0) == expect_attention, f"kiln ops {ops}\n{report}"
    assert "softmax" not in ops, f"softmax left unfused: {ops}"


# ---- the decomposed SDPA forms on CPU (fuse_attention) -------------------------------------

FORMS = {
    "plain": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), None),
    "causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), None),
    "scale": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3), None),
    "bool_mask": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), "bool"),
    "bool_mask_per_batch": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), "bool4"),
    "float_mask": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), "float"),
    "gqa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), "gqa"),
}


def _form_inputs(kind, dtype):
    hk = 2 if kind == "gqa" else None
    q, k, v = _qkv(2, 4, 9, 11, 16, dtype, hk=hk)
    g = torch.Generator().manual_seed(1)
    if kind == "bool":
        return [q, k, v, torch.rand(9, 11, generator=g) < 0.7]
    if kind == "bool4":
        return [q, k, v, torch.rand(2, 1, 9, 11, generator=g) < 0.7]
    if kind == "float":
        return [q, k, v, torch.randn(9, 11, generator=g).to(dtype)]
    return [q, k, v]


@pytest.mark.parametrize("dtype", [f32, f16, bf16], ids=str)
@pytest.mark.parametrize("form", list(FORMS))
def test_sdpa_forms_fuse_on_cpu(form, dtype):
    fn, kind = FORMS[form]
    inputs = _form_inputs(kind, dtype)
    with torch.no_grad():
        expected = fn(*inputs)
    got, report = compile_and_report(fn, *inputs)
    assert_close(got, expected, dtype, **TOL[dtype])
    _check_fused(report)


def test_fully_masked_rows_give_zeros_like_eager():
    q, k, v = _qkv(1, 2, 4, 5, 8, f32)
    mask = torch.ones(4, 5, dtype=torch.bool)
    mask[2] = False
    fn = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)  # noqa: E731
    with torch.no_grad():
        expected = fn(q, k, v, mask)
    got, report = compile_and_report(fn, q, k, v, mask)
    assert_close(got, expected, f32)
    assert torch.equal(got[:, :, 2], torch.zeros_like(got[:, :, 2]))
    _check_fused(report)


def test_plain_softmax_attention_fuses_with_its_scale():
    fn = lambda q, k, v: torch.softmax(q @ k.transpose(-1, -2) * 0.25, -1) @ v  # noqa: E731
    q, k, v = _qkv(2, 3, 5, 7, 8, f32, ev=4)
    with torch.no_grad():
        expected = fn(q, k, v)
    got, report = compile_and_report(fn, q, k, v)
    assert_close(got, expected, f32)
    _check_fused(report)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_scale_the_dtype_cannot_hold_still_fuses(dtype):
    # LLaMA's eager attention multiplies by head_dim ** -0.5; 32 ** -0.5 is no f16 or bf16 number, so the
    # product is built in f32 (Note [Scalars in f16 and bf16]) and fuse_attention reads the scale from there.
    fn = lambda q, k, v: torch.softmax(q @ k.transpose(-1, -2) * 32 ** -0.5, -1) @ v  # noqa: E731
    q, k, v = _qkv(2, 3, 5, 7, 32, dtype)
    with torch.no_grad():
        expected = fn(q, k, v)
    got, report = compile_and_report(fn, q, k, v)
    assert_close(got, expected, dtype)
    _check_fused(report)
    scales = re.findall(r"scale=([0-9.e-]+)", "\n".join(_graph_texts(report)))
    assert [float(s) for s in scales] == pytest.approx([32 ** -0.5], rel=1e-7), scales


def test_attention_weights_used_elsewhere_are_not_fused():
    """When the probabilities are an output too, fusing would compute them twice: kiln keeps bmm/softmax."""
    def fn(q, k, v):
        p = torch.softmax(q @ k.transpose(-1, -2), -1)
        return p @ v, p

    q, k, v = _qkv(1, 2, 5, 7, 8, f32)
    with torch.no_grad():
        expected = fn(q, k, v)
    got, report = compile_and_report(fn, q, k, v)
    assert_close(got, expected, f32)
    assert "attention" not in _kiln_ops(report)


# ---- every SDPA overload, as an ATen graph built directly -------------------------------------

# overload -> (call, index of the attention output). Masks go by each schema's name.
OVERLOADS = {
    "scaled_dot_product_attention": lambda q, k, v, m, causal: aten.scaled_dot_product_attention.default(
        q, k, v, attn_mask=m, is_causal=causal),
    "_scaled_dot_product_attention_math": lambda q, k, v, m, causal: aten._scaled_dot_product_attention_math.default(
        q, k, v, attn_mask=m, is_causal=causal)[0],
    "_scaled_dot_product_flash_attention_for_cpu": lambda q, k, v, m, causal: (
        aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v, is_causal=causal, attn_mask=m)[0]),
    "_scaled_dot_product_flash_attention": lambda q, k, v, m, causal: aten._scaled_dot_product_flash_attention.default(
        q, k, v, is_causal=causal)[0],
    "_scaled_dot_product_efficient_attention": lambda q, k, v, m, causal: (
        aten._scaled_dot_product_efficient_attention.default(q, k, v, m, False, is_causal=causal)[0]),
    "_scaled_dot_product_cudnn_attention": lambda q, k, v, m, causal: aten._scaled_dot_product_cudnn_attention.default(
        q, k, v, m, False, is_causal=causal)[0],
    "_scaled_dot_product_fused_attention_overrideable": lambda q, k, v, m, causal: (
        aten._scaled_dot_product_fused_attention_overrideable.default(q, k, v, m, is_causal=causal)[0]),
}
MASKED = {"scaled_dot_product_attention", "_scaled_dot_product_attention_math",
          "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
          "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_fused_attention_overrideable"}


def _compile_direct(fn, inputs):
    """Builds fn's ATen graph as written (shapes from fake tensors: the CUDA-only overloads have no CPU
    kernel) and compiles it the way the Dynamo backend compiles an ATen graph."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    from kiln.compile_fx import compile_fx_graph
    from kiln.options import Options

    gm = torch.fx.symbolic_trace(fn)
    FakeTensorProp(gm, FakeTensorMode(allow_non_fake_inputs=True)).propagate(*inputs)
    module, report = compile_fx_graph(gm, set(), torch.device("cpu"), Options())
    return module, kiln.report.Report([report])


@pytest.mark.parametrize("mask", ["none", "bool", "float", "causal"])
@pytest.mark.parametrize("overload", list(OVERLOADS))
def test_every_sdpa_overload_maps_to_attention(overload, mask):
    if mask in ("bool", "float") and overload not in MASKED:
        pytest.skip("this overload takes no mask")
    if mask == "bool" and overload in ("_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
                                       "_scaled_dot_product_fused_attention_overrideable"):
        pytest.skip("attn_bias is additive")
    q, k, v = _qkv(2, 3, 6, 10, 8, f32)
    g = torch.Generator().manual_seed(2)
    m = {"bool": torch.rand(6, 10, generator=g) < 0.7, "float": torch.randn(2, 1, 6, 10, generator=g)}.get(mask)
    causal = mask == "causal"
    call = OVERLOADS[overload]
    fn = (lambda q, k, v, m: call(q, k, v, m, False)) if m is not None else (lambda q, k, v: call(q, k, v, None, causal))
    inputs = [q, k, v] + ([m] if m is not None else [])
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal)
    module, report = _compile_direct(fn, inputs)
    assert_close(module(*inputs), expected, f32)
    assert not report.fallbacks, str(report)
    assert _kiln_ops(report).get("attention") == 1


def test_used_logsumexp_falls_back_with_a_reason():
    fn = lambda q, k, v: aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v)[1] * 2  # noqa: E731
    q, k, v = _qkv(1, 2, 5, 5, 8, f32)
    _, report = _compile_direct(fn, [q, k, v])
    reasons = [d.reason for d in report.fallbacks]
    assert any("output 1" in r and "not produced by kiln" in r for r in reasons), str(report)


def test_dropout_falls_back_with_a_reason():
    fn = lambda q, k, v: aten.scaled_dot_product_attention.default(q, k, v, dropout_p=0.5)  # noqa: E731
    q, k, v = _qkv(1, 2, 5, 5, 8, f32)
    _, report = _compile_direct(fn, [q, k, v])
    assert any("dropout" in d.reason for d in report.fallbacks), str(report)


def test_gqa_through_the_composite_overload():
    fn = lambda q, k, v: aten.scaled_dot_product_attention.default(q, k, v, enable_gqa=True)  # noqa: E731
    q, k, v = _qkv(2, 6, 5, 7, 8, f32, hk=3)
    module, report = _compile_direct(fn, [q, k, v])
    assert_close(module(q, k, v), F.scaled_dot_product_attention(q, k, v, enable_gqa=True), f32)
    assert not report.fallbacks, str(report)


# ---- BERT- and GPT-2-like blocks on CPU -------------------------------------------------------


def _run_block(model, inputs, dtype=f32):
    with torch.no_grad():
        expected = model(*inputs)
    got, report = compile_and_report(model, *inputs)
    if hasattr(expected, "last_hidden_state"):
        expected, got = expected.last_hidden_state, got.last_hidden_state
    assert_close(got, expected, dtype, **TOL[dtype])
    return report


def test_bert_like_block_with_padding_mask():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=1, num_attention_heads=4,
                                     intermediate_size=128, max_position_embeddings=32)
    model = transformers.BertModel(config).eval()
    ids = torch.randint(0, 100, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, 8:] = 0  # padding in the second sequence
    report = _run_block(lambda i, m: model(i, attention_mask=m), [ids, mask])
    _check_fused(report)
    # torch's math attention leaves [L, B, H, Ev] copies that BERT permutes and copies again to merge its
    # heads: both copies go (read_through_copies reads the first one's source, simplify drops the second).
    assert not any("contiguous(" in t for t in _graph_texts(report)), _graph_texts(report)


@pytest.mark.parametrize("dtype", [f32, f16], ids=str)
def test_bert_without_attention_mask_runs_unmasked(dtype):
    # Called without a mask, transformers builds BERT's additive padding mask from ones and a traced scalar
    # constant (1.0 - mask): every element is 0. The constant becomes a literal (kiln.fx_constants), the
    # mask is evaluated at compile time and dropped (causal_masks): attention runs with no mask at all.
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=128, max_position_embeddings=32)
    model = transformers.BertModel(config).eval().to(dtype)
    report = _run_block(model, [torch.randint(0, 100, (2, 12))], dtype)
    _check_fused(report, expect_attention=2)
    attentions = [line for t in _graph_texts(report) for line in t.splitlines() if "= attention(" in line]
    assert len(attentions) == 2 and all(line.count("%") == 4 for line in attentions), attentions  # q, k, v only
    assert not any("_tensor_constant" in t for t in _graph_texts(report)), _graph_texts(report)


def _graph_texts(report):
    return [r.exe._native.graph_text() for g in report.graphs for r in g.region_modules]


@pytest.mark.parametrize("seq", [12, 40])  # 40: the mask's aranges are computed, not folded into literals
def test_gpt2_like_causal_block(seq):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=100, n_positions=64, n_embd=64, n_layer=1, n_head=4)
    model = transformers.GPT2Model(config).eval()
    report = _run_block(model, [torch.randint(0, 100, (2, seq))])
    _check_fused(report)
    # transformers' mask (arange, le, where) is the causal pattern: causal=true, no mask read (causal_masks)
    texts = _graph_texts(report)
    assert any("causal=true" in t for t in texts) and not any("where" in t for t in texts), texts


@pytest.mark.parametrize("mask_kind", ["bool", "additive", "bf16_with_f16_lowest", "shifted"])
def test_constant_causal_masks_become_causal(mask_kind):
    # A mask built in the model from shapes alone: the causal pattern becomes causal=true; a bottom-right
    # aligned one (fewer queries than keys) is a different pattern and stays a mask. Same values as eager.
    # Some transformers versions fill a bf16 model's mask with f16's lowest (-65504, -65536 in bf16).
    dtype = bf16 if mask_kind == "bf16_with_f16_lowest" else f32
    masked_value = -65504.0 if dtype == bf16 else float("-inf")

    def fn(q, k, v):
        L, S = q.shape[-2], k.shape[-2]
        allowed = torch.ones(L, S, dtype=torch.bool).tril(S - L if mask_kind == "shifted" else 0)
        mask = allowed if mask_kind in ("bool", "shifted") else \
            torch.zeros(L, S, dtype=dtype).masked_fill(~allowed, masked_value)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    inputs = _qkv(2, 3, 20 if mask_kind == "shifted" else 33, 33, 16, dtype)
    with torch.no_grad():
        expected = fn(*inputs)
    got, report = compile_and_report(fn, *inputs)
    assert_close(got, expected, dtype, **TOL[dtype])
    assert not report.fallbacks, str(report)
    causal = any("causal=true" in t for t in _graph_texts(report))
    assert causal == (mask_kind != "shifted"), _graph_texts(report)


@pytest.mark.parametrize("batch", [1, 3])
def test_packed_projection_copy_becomes_strided_views(batch):
    # torchvision's multi-head attention: the packed q/k/v projection re-laid out as [3, L, B, E] by a copy,
    # then [B, H, L, D] views of it. The attention reads the projection through as_strided views instead
    # (read_through_copies); same values as torch.
    L, E, H = 7, 32, 4
    D = E // H
    aten = torch.ops.aten

    def fn(x, w, b):
        proj = aten.view.default(aten.addmm.default(b, aten.view.default(x, [L * batch, E]), aten.t.default(w)),
                                 [L, batch, 3, E])
        packed = aten.clone.default(aten.squeeze.dim(aten.transpose.int(aten.unsqueeze.default(proj, 0), 0, -2), -2),
                                    memory_format=torch.contiguous_format)
        q, k, v = (aten.view.default(aten.transpose.int(aten.view.default(aten.select.int(packed, 0, i),
                                                                          [L, batch * H, D]), 0, 1), [batch, H, L, D])
                   for i in range(3))
        return aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v)[0]

    g = torch.Generator().manual_seed(3)
    inputs = [torch.randn(L, batch, E, generator=g), torch.randn(3 * E, E, generator=g), torch.randn(3 * E, generator=g)]
    expected = fn(*inputs)
    module, report = _compile_direct(fn, inputs)
    assert_close(module(*inputs), expected, f32)
    assert not report.fallbacks, str(report)
    texts = _graph_texts(report)
    assert sum(t.count("as_strided(") for t in texts) == 3 and not any("contiguous(" in t for t in texts), texts


@pytest.mark.parametrize("batch", [1, 3])
def test_torch_multi_head_attention_fuses_at_any_batch(batch):
    # nn.MultiheadAttention (as torchvision's ViT calls it) multiplies [B*H, L, D] operands into [B, H, L, S]
    # scores; the operands are read through reshapes to the scores' batch dims, so it fuses at batch > 1 too.
    vision_transformer = pytest.importorskip("torchvision.models.vision_transformer")
    torch.manual_seed(0)
    model = vision_transformer.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                 hidden_dim=64, mlp_dim=128).eval()
    model.heads = torch.nn.Identity()  # torchvision zero-initializes the head: compare the features
    images = torch.randn(batch, 3, 32, 32)
    report = _run_block(model, [images])
    assert not report.fallbacks, str(report)
    assert _kiln_ops(report).get("attention") == 2, _kiln_ops(report)
    texts = _graph_texts(report)
    assert sum(t.count("as_strided(") for t in texts) == 6, texts  # the packed projection read in place
    # No copies but the patch embedding's: the projections multiply rows where they are (matmul_row_order;
    # at batch 1 the transposes only move a dim of size 1 and simplify makes them reshapes), attention
    # writes [B, L, H, Ev] (heads_last), and the residual adds run in the output projections (the one add
    # left is the position embedding's).
    (text,) = texts
    assert text.count("contiguous(") == 1 and text.count("heads_last=true") == 2, text
    assert text.count(" add(") == 1, text


MERGE_HEADS = """
graph {
  input %q : f32[2,4,6,8]
  input %k : f32[2,4,5,8]
  input %v : f32[2,4,5,8]
  input %m : bool[2,1,6,5]
  %a = attention(%q, %k, %v, %m) {scale=0.0} : f32[2,4,6,8]
  %t = permute(%a) {dims=[0,2,1,3]} : f32[2,6,4,8]{192,8,48,1}
  %c = contiguous(%t) : f32[2,6,4,8]
  %r = reshape(%c) {shape=[2,6,32]} : f32[2,6,32]
  return %r
}
"""


def test_attention_writes_merged_heads_on_cpu():
    """contiguous(transpose(attention)) becomes attention {heads_last}: same values, no copy."""
    graph = _kiln.Graph.parse(MERGE_HEADS)
    exe = kiln.compile_graph(graph)
    text = exe._native.graph_text()
    assert "heads_last=true" in text and "contiguous" not in text, text
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8)
    m = torch.rand(2, 1, 6, 5) > 0.3
    m[..., 0] = True  # every row sees a key
    (got,) = exe(q.numpy(), k.numpy(), v.numpy(), m.numpy())
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=m).transpose(1, 2).reshape(2, 6, 32)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


# ---- CUDA: the flash kernel (skipped without a GPU) ----------------------------------------


cuda = pytest.mark.skipif(not cuda_available(), reason="needs a GPU and kiln's CUDA backend")


@cuda
@pytest.mark.parametrize("dtype", [f16, bf16], ids=str)
@pytest.mark.parametrize("head_dim", [32, 33, 36, 64, 80, 128])
@pytest.mark.parametrize("seq", [1, 7, 128, 197, 513])
def test_cuda_flash_attention(seq, head_dim, dtype):
    # 1, 7 and 513 causal (513: nine query blocks, started last to first, Note [Heavy blocks first]);
    # 128 (whole tiles) and 197 (ViT's: a ragged last tile, a last query block with one busy warp) not.
    # Head dims 33 (q read one element at a time) and 36 (rows not in 16-byte pieces: tiles loaded and
    # the output written element by element) take the kernel's unvectorized paths.
    causal = seq in (1, 7, 513)
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    inputs = _qkv(2, 4, seq, seq, head_dim, dtype, device="cuda")
    with torch.no_grad():
        expected = fn(*inputs)
    got, report = compile_and_report(fn, *inputs)
    assert_close(got, expected, dtype, **TOL[dtype])
    assert not report.fallbacks, str(report)
    assert _kiln_ops(report).get("attention") == 1, str(report)


@cuda
@pytest.mark.parametrize("dtype", [f16, bf16], ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("heads", [4, 64], ids=["split_keys", "whole_tiles"])
def test_cuda_flash_attention_small_and_large_grids(heads, causal, dtype):
    # Note [Split keys] (attention_kernels.cu): a grid under one block per multiprocessor splits each
    # key tile between two warps and merges their softmax states (2 x 4 heads x 4 query blocks = 32
    # blocks); 2 x 64 heads x 4 = 512 blocks take whole tiles. 200 keys: a ragged last tile.
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    inputs = _qkv(2, heads, 200, 200, 64, dtype, device="cuda")
    with torch.no_grad():
        expected = fn(*inputs)
    got, report = compile_and_report(fn, *inputs)
    assert_close(got, expected, dtype, **TOL[dtype])
    assert _kiln_ops(report).get("attention") == 1, str(report)


@cuda
@pytest.mark.parametrize("dtype", [f16, bf16, f32], ids=str)
@pytest.mark.parametrize("form", list(FORMS))
def test_cuda_sdpa_forms(form, dtype):
    fn, kind = FORMS[form]
    inputs = [t.cuda() for t in _form_inputs(kind, dtype)]
    with torch.no_grad():
        expected = fn(*inputs)
    got, report = compile_and_report(fn, *inputs)
    assert_close(got, expected, dtype, **TOL[dtype])
    assert not report.fallbacks, str(report)
    assert _kiln_ops(report).get("attention") == 1, str(report)


@cuda
@pytest.mark.parametrize("dtype", [f16, bf16], ids=str)
def test_cuda_gqa_masked_long_keys(dtype):
    # L != S, a key count past several tiles and not a multiple of 64, an additive per-batch mask, GQA.
    fn = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)  # noqa: E731
    q, k, v = _qkv(2, 8, 70, 300, 64, dtype, device="cuda", hk=2)
    m = torch.randn(2, 1, 70, 300, device="cuda", dtype=dtype)
    with torch.no_grad():
        expected = fn(q, k, v, m)
    got, report = compile_and_report(fn, q, k, v, m)
    assert_close(got, expected, dtype, **TOL[dtype])
    assert not report.fallbacks, str(report)


@cuda
@pytest.mark.parametrize("dtype", [f16, bf16, f32], ids=str)
@pytest.mark.parametrize("seq", [7, 197])
def test_cuda_attention_writes_merged_heads(seq, dtype):
    # Multi-head attention's merge of heads: the kernels write [B, L, H, D] themselves (heads_last).
    def fn(q, k, v):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=seq == 7)
        return out.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1) * 2

    inputs = _qkv(2, 4, seq, seq, 64, dtype, device="cuda")
    with torch.no_grad():
        expected = fn(*inputs)
    got, report = compile_and_report(fn, *inputs)
    assert_close(got, expected, dtype, **TOL[dtype])
    assert not report.fallbacks, str(report)
    texts = _graph_texts(report)
    assert any("heads_last=true" in t for t in texts), texts


@cuda
@pytest.mark.parametrize("dtype", [f16, bf16], ids=str)
def test_cuda_gpt2_like_causal_block(dtype):
    # transformers' causal mask (finfo.min or -inf where masked) runs as the kernel's causal path.
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=100, n_positions=256, n_embd=128, n_layer=2, n_head=2)
    model = transformers.GPT2Model(config).eval().to("cuda", dtype)
    ids = torch.randint(0, 100, (2, 160), device="cuda")
    with torch.no_grad():
        expected = model(ids).last_hidden_state
    reports = []
    compiled = torch.compile(model, backend=functools.partial(kiln_backend, reports=reports))
    with torch.no_grad():
        for _ in range(4):  # the first call runs eagerly, the second captures, the rest replay
            got = compiled(ids).last_hidden_state
    assert_close(got, expected, dtype, **TOL[dtype])
    report = kiln.report.Report(reports)
    assert not report.fallbacks, str(report)
    texts = _graph_texts(report)
    lines = [line for t in texts for line in t.splitlines() if "attention(" in line or "where" in line]
    assert any("causal=true" in t for t in texts) and not any("where" in t for t in texts), lines  # names the culprit
    # Attention, the residual epilogues and the key/value outputs all run inside one replayed CUDA graph.
    for g in report.graphs:
        for region in g.region_modules:
            stats = region.exe.call_stats()
            assert stats["uncaptured_reason"] == "" and stats["graph_replays"] >= 2, stats
