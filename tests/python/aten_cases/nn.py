"""ATen op cases: matrix products, convolution, normalization, softmax, pooling and attention."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: F401 - used by some families

from aten_cases.common import *  # noqa: F401,F403 - the case vocabulary: case, randn, dtypes, ...

# ---- matrix products ---------------------------------------------------------------------

case("mm", torch.mm, lambda g: (randn(g, 3, 5), randn(g, 5, 7)), "aten.mm.default")
case("mm_transposed_f64", torch.mm, lambda g: (transposed(randn(g, 3, 5, dtype=f64)), transposed(randn(g, 5, 7, dtype=f64))), "aten.mm.default")
case("mm_f16", torch.mm, lambda g: (randn(g, 9, 17, dtype=f16), randn(g, 17, 5, dtype=f16)), "aten.mm.default")
case("mm_bf16", torch.mm, lambda g: (randn(g, 9, 17, dtype=bf16), randn(g, 17, 5, dtype=bf16)), "aten.mm.default")
case("mm_sliced", lambda a, b: a[:, ::2] @ b, lambda g: (randn(g, 4, 10), randn(g, 5, 3)), "aten.mm.default")
case("bmm", torch.bmm, lambda g: (randn(g, 3, 4, 5), randn(g, 3, 5, 7)), "aten.bmm.default")
case("bmm_transposed", lambda a, b: torch.bmm(a, b.transpose(1, 2)), lambda g: (randn(g, 2, 4, 5), randn(g, 2, 7, 5)), "aten.bmm.default")
case("matmul_bcast", torch.matmul, lambda g: (randn(g, 2, 3, 4, 5), randn(g, 5, 7)), ("aten.mm.default", "aten.view.default"))
case("matmul_batched_bcast", torch.matmul, lambda g: (randn(g, 2, 3, 4, 5), randn(g, 3, 5, 6)), ("aten.bmm.default", "aten.expand.default"))
case("matmul_vec", torch.matmul, lambda g: (randn(g, 3, 5), randn(g, 5)), ("aten.mul.Tensor", "aten.sum.dim_IntList"))
case("matmul_direct", lambda a, b: aten.matmul.default(a, b), lambda g: (randn(g, 3, 4, 5), randn(g, 3, 5, 2)), "aten.matmul.default", direct=True)
case("mm_int64_direct", lambda a, b: aten.mm.default(a, b), lambda g: (randint(g, 3, 4), randint(g, 4, 2)), "aten.mm.default", direct=True)
case("linear", lambda x, w, b: F.linear(x, w, b), lambda g: (randn(g, 3, 5), randn(g, 7, 5), randn(g, 7)), ("aten.addmm.default", "aten.permute.default"))
case("linear_3d", lambda x, w, b: F.linear(x, w, b), lambda g: (randn(g, 2, 3, 5), randn(g, 7, 5), randn(g, 7)), "aten.addmm.default")
case("addmm_alpha_beta", lambda b, x, w: torch.addmm(b, x, w, beta=0.5, alpha=2.0), lambda g: (randn(g, 3, 7), randn(g, 3, 5), randn(g, 5, 7)), "aten.addmm.default")
case("addmm_bcast_bias", lambda b, x, w: torch.addmm(b, x, w), lambda g: (randn(g, 1, 7), transposed(randn(g, 3, 5)), randn(g, 5, 7)), "aten.addmm.default")

# ---- convolution, normalization, softmax, pooling -------------------------------------------

case("conv2d", lambda x, w, b: F.conv2d(x, w, b), lambda g: (randn(g, 2, 3, 7, 9), randn(g, 4, 3, 3, 3), randn(g, 4)), "aten.convolution.default")
case("conv2d_stride_pad_dil", lambda x, w: F.conv2d(x, w, None, stride=2, padding=(1, 2), dilation=(2, 1)), lambda g: (randn(g, 1, 3, 9, 8), randn(g, 5, 3, 3, 2)), "aten.convolution.default")
case("conv2d_groups", lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=2), lambda g: (randn(g, 2, 4, 5, 5), randn(g, 6, 2, 3, 3), randn(g, 6)), "aten.convolution.default")
case("conv2d_depthwise_f64", lambda x, w: F.conv2d(x, w, padding=1, groups=3), lambda g: (randn(g, 1, 3, 6, 5, dtype=f64), randn(g, 3, 1, 3, 3, dtype=f64)), "aten.convolution.default")
case("conv2d_channels_last", lambda x, w: F.conv2d(x, w), lambda g: (randn(g, 2, 3, 6, 5).to(memory_format=torch.channels_last), randn(g, 4, 3, 1, 1)), "aten.convolution.default")
case("conv2d_f16", lambda x, w: F.conv2d(x, w, padding=1), lambda g: (randn(g, 1, 3, 6, 5, dtype=f16), randn(g, 4, 3, 3, 3, dtype=f16)), "aten.convolution.default")
case(
    "conv_transpose_falls_back",
    lambda x, w: F.conv_transpose2d(x, w),
    lambda g: (randn(g, 1, 3, 5, 5), randn(g, 3, 2, 3, 3)),
    (),
    fallback={"aten.convolution.default": "transposed convolution"},
)
case("batch_norm_eval", lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=False, eps=1e-3), lambda g: (randn(g, 2, 3, 5, 7), randn(g, 3), positive(g, 3), randn(g, 3), randn(g, 3)), "aten._native_batch_norm_legit_no_training.default")
case("batch_norm_no_affine", lambda x, m, v: F.batch_norm(x, m, v, training=False), lambda g: (transposed(randn(g, 2, 4, 5, 3)), randn(g, 4), positive(g, 4)), "aten._native_batch_norm_legit_no_training.default")
case("batch_norm_bias_only_direct", lambda x, m, v, b: aten._native_batch_norm_legit_no_training.default(x, None, b, m, v, 0.1, 1e-5)[0], lambda g: (randn(g, 2, 3, 4, 4), randn(g, 3), positive(g, 3), randn(g, 3)), "aten._native_batch_norm_legit_no_training.default", direct=True)
case("layer_norm", lambda x, w, b: F.layer_norm(x, (7,), w, b), lambda g: (randn(g, 3, 5, 7), randn(g, 7), randn(g, 7)), "aten.native_layer_norm.default")
case("layer_norm_2d_no_affine", lambda x: F.layer_norm(x, (5, 7), eps=1e-3), lambda g: (randn(g, 3, 5, 7),), "aten.native_layer_norm.default")
case("layer_norm_f16_transposed", lambda x, w, b: F.layer_norm(x, (6,), w, b), lambda g: (transposed(randn(g, 6, 5, dtype=f16)).transpose(0, 1), randn(g, 6, dtype=f16), randn(g, 6, dtype=f16)), "aten.native_layer_norm.default")
case("group_norm", lambda x, w, b: F.group_norm(x, 4, w, b), lambda g: (randn(g, 2, 8, 5, 3), randn(g, 8), randn(g, 8)), "aten.native_group_norm.default")
case("group_norm_no_affine_3d", lambda x: F.group_norm(x, 2, eps=1e-3), lambda g: (randn(g, 3, 6, 7),), "aten.native_group_norm.default")
case("group_norm_f16_channels_last", lambda x, w, b: F.group_norm(x, 3, w, b), lambda g: (randn(g, 2, 6, 4, 4, dtype=f16).to(memory_format=torch.channels_last), randn(g, 6, dtype=f16), randn(g, 6, dtype=f16)), "aten.native_group_norm.default")
case("group_norm_weight_only_direct", lambda x, w: aten.native_group_norm.default(x, w, None, 2, 4, 9, 2, 1e-5)[0], lambda g: (randn(g, 2, 4, 3, 3), randn(g, 4)), "aten.native_group_norm.default", direct=True)
case("layer_norm_bias_only_direct", lambda x, b: aten.native_layer_norm.default(x, [7], None, b, 1e-5)[0], lambda g: (randn(g, 3, 7), randn(g, 7)), "aten.native_layer_norm.default", direct=True)
case("softmax_last", lambda x: torch.softmax(x, -1), lambda g: (randn(g, 3, 5, 7),), "aten._softmax.default")
case("softmax_dim0_transposed", lambda x: torch.softmax(x, 0), lambda g: (transposed(randn(g, 5, 7)),), "aten._softmax.default")
case("softmax_f16", lambda x: torch.softmax(x, 1), lambda g: (randn(g, 3, 5, 7, dtype=f16),), "aten._softmax.default")
case("softmax_bf16_to_f32", lambda x: torch.softmax(x, -1, dtype=f32), lambda g: (randn(g, 3, 7, dtype=bf16),), ("aten._softmax.default", "aten._to_copy.default"))
case("softmax_int_direct", lambda x: aten.softmax.int(x, -2), lambda g: (randn(g, 3, 5, 7),), "aten.softmax.int", direct=True)
case("log_softmax", lambda x: F.log_softmax(x, dim=-1), lambda g: (randn(g, 3, 5, 7) * 5,), "aten._log_softmax.default")
case("log_softmax_f64_dim1", lambda x: F.log_softmax(x, dim=1), lambda g: (randn(g, 3, 5, 7, dtype=f64),), "aten._log_softmax.default")
case("log_softmax_int_direct", lambda x: aten.log_softmax.int(x, 0, dtype=f64), lambda g: (randn(g, 4, 6),), "aten.log_softmax.int", direct=True)
case("max_pool2d", lambda x: F.max_pool2d(x, 2), lambda g: (randn(g, 2, 3, 7, 9),), "aten.max_pool2d_with_indices.default")
case("max_pool2d_pad_ceil", lambda x: F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True), lambda g: (randn(g, 1, 2, 7, 8),), "aten.max_pool2d_with_indices.default")
case("max_pool2d_indices", lambda x: F.max_pool2d(x, (2, 3), stride=(1, 2), return_indices=True), lambda g: (randn(g, 1, 2, 6, 7),), "aten.max_pool2d_with_indices.default")
case("max_pool2d_dilation_f16", lambda x: F.max_pool2d(x, 2, dilation=2), lambda g: (randn(g, 1, 2, 7, 7, dtype=f16),), "aten.max_pool2d_with_indices.default")
case("avg_pool2d", lambda x: F.avg_pool2d(x, 2), lambda g: (randn(g, 2, 3, 7, 9),), "aten.avg_pool2d.default")
case("avg_pool2d_pad_exclude", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False), lambda g: (randn(g, 1, 2, 7, 8),), "aten.avg_pool2d.default")
case("avg_pool2d_ceil_divisor", lambda x: F.avg_pool2d(x, 3, stride=2, ceil_mode=True, divisor_override=4), lambda g: (randn(g, 1, 2, 8, 7),), "aten.avg_pool2d.default")
case("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (3, 2)), lambda g: (randn(g, 2, 3, 7, 5),), "aten._adaptive_avg_pool2d.default")
case("adaptive_avg_pool2d_1", lambda x: F.adaptive_avg_pool2d(x, 1), lambda g: (randn(g, 2, 3, 5, 5),), "aten.mean.dim")
case("adaptive_avg_pool2d_direct", lambda x: aten.adaptive_avg_pool2d.default(x, [2, 3]), lambda g: (randn(g, 1, 3, 5, 7),), "aten.adaptive_avg_pool2d.default", direct=True)

# ---- attention -----------------------------------------------------------------------------

case("sdpa_direct", lambda q, k, v: aten.scaled_dot_product_attention.default(q, k, v), lambda g: (randn(g, 2, 3, 5, 8), randn(g, 2, 3, 7, 8), randn(g, 2, 3, 7, 4)), "aten.scaled_dot_product_attention.default", direct=True)
case("sdpa_causal_scale_direct", lambda q, k, v: aten.scaled_dot_product_attention.default(q, k, v, is_causal=True, scale=0.3), lambda g: (randn(g, 1, 2, 6, 8), randn(g, 1, 2, 6, 8), randn(g, 1, 2, 6, 8)), "aten.scaled_dot_product_attention.default", direct=True)
case("sdpa_mask_direct", lambda q, k, v, m: aten.scaled_dot_product_attention.default(q, k, v, attn_mask=m), lambda g: (randn(g, 1, 2, 5, 8), randn(g, 1, 2, 7, 8), randn(g, 1, 2, 7, 8), randn(g, 5, 7)), "aten.scaled_dot_product_attention.default", direct=True)
case("sdpa_bool_mask_direct", lambda q, k, v, m: aten.scaled_dot_product_attention.default(q, k, v, attn_mask=m), lambda g: (randn(g, 1, 2, 5, 8), randn(g, 1, 2, 7, 8), randn(g, 1, 2, 7, 8), torch.rand(5, 7, generator=g) < 0.8), "aten.scaled_dot_product_attention.default", direct=True)
case("sdpa_flash_cpu_direct", lambda q, k, v: aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v)[0], lambda g: (randn(g, 1, 2, 5, 8), randn(g, 1, 2, 7, 8), randn(g, 1, 2, 7, 8)), "aten._scaled_dot_product_flash_attention_for_cpu.default", direct=True)


def sdpa_cuda_overload(call):
    """A CUDA-only SDPA overload: traced as `call`; eager on CPU (no kernel there) runs the math overload."""
    return lambda q, k, v: call(q, k, v)[0] if isinstance(q, torch.fx.Proxy) else aten._scaled_dot_product_attention_math(q, k, v)[0]


qkv_5_7 = lambda g: (randn(g, 1, 2, 5, 8), randn(g, 1, 2, 7, 8), randn(g, 1, 2, 7, 8))  # noqa: E731
case("sdpa_math_direct", lambda q, k, v: aten._scaled_dot_product_attention_math.default(q, k, v, is_causal=True)[0], qkv_5_7, "aten._scaled_dot_product_attention_math.default", direct=True)
case("sdpa_flash_cuda_direct", sdpa_cuda_overload(aten._scaled_dot_product_flash_attention.default), qkv_5_7, "aten._scaled_dot_product_flash_attention.default", direct=True)
case("sdpa_efficient_direct", sdpa_cuda_overload(lambda q, k, v: aten._scaled_dot_product_efficient_attention.default(q, k, v, None, False)), qkv_5_7, "aten._scaled_dot_product_efficient_attention.default", direct=True)
case("sdpa_cudnn_direct", sdpa_cuda_overload(lambda q, k, v: aten._scaled_dot_product_cudnn_attention.default(q, k, v, None, False)), qkv_5_7, "aten._scaled_dot_product_cudnn_attention.default", direct=True)
case("sdpa_overrideable_direct", sdpa_cuda_overload(aten._scaled_dot_product_fused_attention_overrideable.default), qkv_5_7, "aten._scaled_dot_product_fused_attention_overrideable.default", direct=True)
