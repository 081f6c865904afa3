"""ATen op cases: promotion corners, special values, views as outputs, odd sizes and layouts, small
compositions and the ops the model zoo needs."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: F401 - used by some families

from aten_cases.common import *  # noqa: F401,F403 - the case vocabulary: case, randn, dtypes, ...

# ---- edge cases: promotion corners, special values, views as outputs ---------------------------

case("gt_i64_float_scalar", lambda x: x > 0.5, lambda g: (randint(g, 4, 5, lo=-2, hi=3),), "aten.gt.Scalar")
case("eq_i32_float_scalar", lambda x: x == 1.5, lambda g: (randint(g, 4, 5, lo=0, hi=3, dtype=i32),), "aten.eq.Scalar")
case("lt_f16_f32_tensor", lambda x, y: x < y, lambda g: (randn(g, 4, 5, dtype=f16), randn(g, 4, 5, dtype=f64)), "aten.lt.Tensor")
case("add_i64_bool", lambda x, m: x + m, lambda g: (randint(g, 4, 5), randbool(g, 4, 5)), "aten.add.Tensor")
case("mul_i32_0d_f64", lambda x, s: x * s, lambda g: (randint(g, 4, 5, dtype=i32), torch.tensor(1.5, dtype=f64)), "aten.mul.Tensor")
case("add_bf16_f16", lambda x, y: x + y, lambda g: (randn(g, 4, 5, dtype=bf16), randn(g, 4, 5, dtype=f16)), "aten.add.Tensor", tol=bf16)
case("add_0d_0d", lambda x, y: x + y, lambda g: (randn(g), randn(g, dtype=f64)), "aten.add.Tensor")
case("div_i64_by_int", lambda x: x / 2, lambda g: (randint(g, 4, 5),), "aten.div.Tensor")
case("add_i8_wraps", lambda x, y: x + y, lambda g: (randint(g, 4, 5, lo=100, hi=127, dtype=torch.int8), randint(g, 4, 5, lo=100, hi=127, dtype=torch.int8)), "aten.add.Tensor")
case("to_i64_from_f16_negative", lambda x: x.to(i64), lambda g: (randn(g, 4, 5, dtype=f16) * 8,), "aten._to_copy.default")
case("compare_to_float", lambda x: (x > 0).to(f32) * x, lambda g: (randn(g, 3, 5, 7),), ("aten.gt.Scalar", "aten._to_copy.default"))
case("where_two_scalars", lambda c: torch.where(c, 1.0, 0.0), lambda g: (randbool(g, 4, 5),), "aten.where.self")
case("sigmoid_tanh_extremes", lambda x: torch.sigmoid(x) + torch.tanh(x), lambda g: (torch.tensor([-1000.0, -90.0, -20.0, 0.0, 20.0, 90.0, 1000.0]),), ("aten.sigmoid.default", "aten.tanh.default"))
case("exp_log_special", lambda x: torch.exp(x) + torch.log(x.abs()), lambda g: (torch.tensor([0.0, -0.0, 100.0, -100.0, float("inf"), float("-inf"), float("nan")]),), ("aten.exp.default", "aten.log.default"))
case("relu_abs_nan_negzero", lambda x: torch.relu(x) + torch.abs(x), lambda g: (torch.tensor([-0.0, 0.0, float("nan"), -float("inf"), 3.0]),), ("aten.relu.default", "aten.abs.default"))
case("clamp_nan", lambda x: torch.clamp(x, -1.0, 1.0), lambda g: (torch.tensor([float("nan"), -5.0, 0.5, 5.0]),), "aten.clamp.default")
case("softmax_masked_rows", lambda x, m: torch.softmax(x.masked_fill(m, float("-inf")), -1), lambda g: (randn(g, 4, 6), torch.tensor([[False] * 6, [True] * 3 + [False] * 3, [True] * 5 + [False], [False] + [True] * 5])), ("aten._softmax.default", "aten.where.self"))
case("softmax_large_values", lambda x: torch.softmax(x * 1000, -1), lambda g: (randn(g, 3, 7),), "aten._softmax.default")
case("log_softmax_large_values", lambda x: F.log_softmax(x * 1000, 0), lambda g: (randn(g, 5, 3),), "aten._log_softmax.default")
case("amax_nan", lambda x: x.amax(-1), lambda g: (torch.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, 6.0]]),), "aten.amax.default")
case("argmax_neg_inf", lambda x: x.argmax(-1), lambda g: (torch.tensor([[float("-inf"), float("-inf")], [float("-inf"), 2.0]]),), "aten.argmax.default")
case("permute_as_output", lambda x: x.permute(2, 0, 1), lambda g: (randn(g, 3, 5, 7),), "aten.permute.default")
case("slice_as_output", lambda x: x[:, 1:4], lambda g: (randn(g, 3, 5, 7),), "aten.slice.Tensor")
case("select_of_transposed_as_output", lambda x: x.t()[2], lambda g: (randn(g, 5, 7),), "aten.select.int")
case("two_outputs_sharing_input", lambda x: (x + 1, x.sum(0)), lambda g: (transposed(randn(g, 5, 7)),), ("aten.add.Tensor", "aten.sum.dim_IntList"))
case("max_pool2d_negative_padded", lambda x: F.max_pool2d(x, 3, stride=1, padding=1), lambda g: (-positive(g, 1, 2, 5, 6) - 1,), "aten.max_pool2d_with_indices.default")
case("avg_pool2d_pad_include", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1), lambda g: (randn(g, 1, 2, 7, 6),), "aten.avg_pool2d.default")
case("avg_pool2d_f64_noncontig", lambda x: F.avg_pool2d(x, 2), lambda g: (transposed(randn(g, 1, 3, 6, 8, dtype=f64)),), "aten.avg_pool2d.default")
case("batch_norm_f16", lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=False), lambda g: (randn(g, 2, 3, 4, 5, dtype=f16), randn(g, 3, dtype=f16), positive(g, 3, dtype=f16), randn(g, 3, dtype=f16), randn(g, 3, dtype=f16)), "aten._native_batch_norm_legit_no_training.default")
case("layer_norm_bf16", lambda x, w, b: F.layer_norm(x, (7,), w, b), lambda g: (randn(g, 3, 5, 7, dtype=bf16), randn(g, 7, dtype=bf16), randn(g, 7, dtype=bf16)), "aten.native_layer_norm.default")
case("gather_transposed_index", lambda x, i: torch.gather(x, 0, i), lambda g: (randn(g, 5, 4), transposed(randint(g, 4, 3, lo=0, hi=5))), "aten.gather.default")
case("cat_0d_promote_f64", lambda x, y: torch.cat([x, y], -2), lambda g: (randn(g, 2, 3), randn(g, 1, 3, dtype=f64)), "aten.cat.default")
case("var_correction_2", lambda x: torch.var(x, -1, correction=2), lambda g: (randn(g, 3, 7),), "aten.var.correction")
case("mean_empty_dim_list_direct", lambda x: aten.mean.dim(x, [], True), lambda g: (randn(g, 3, 5),), "aten.mean.dim", direct=True)

# ---- larger odd sizes: past the CPU kernels' chunk (1024) and threading (32768 elements) sizes ---------

case("big_add_bcast_transposed", lambda x, y: x * 2 + y, lambda g: (transposed(randn(g, 37, 33, 29)), randn(g, 33, 1)), ("aten.add.Tensor", "aten.mul.Tensor"))
case("big_fused_chain_f16", lambda x: torch.sigmoid(x) * torch.tanh(x) - x.abs(), lambda g: (randn(g, 3, 1031, dtype=f16),), ("aten.sigmoid.default", "aten.tanh.default"))
case("big_where_i64", lambda c, x: torch.where(c, x, -x), lambda g: (randbool(g, 41, 1000), randint(g, 41, 1000)), "aten.where.self")
case("big_cast_sliced", lambda x: x.to(f16), lambda g: (strided(randn(g, 35, 1001)),), "aten._to_copy.default")
case("big_mm", torch.mm, lambda g: (randn(g, 67, 129), randn(g, 129, 33)), "aten.mm.default")
case("big_bmm_transposed", lambda a, b: a @ b.transpose(-1, -2), lambda g: (randn(g, 3, 45, 70), randn(g, 3, 31, 70)), "aten.bmm.default")
case("big_sum_all", lambda x: x.sum(), lambda g: (randn(g, 41, 1003),), "aten.sum.dim_IntList")
case("big_sum_mid_dim", lambda x: x.sum(1), lambda g: (randn(g, 7, 1025, 5),), "aten.sum.dim_IntList")
case("big_amax_transposed", lambda x: x.amax(0), lambda g: (transposed(randn(g, 2049, 19)),), "aten.amax.default")
case("big_mean_keepdim", lambda x: x.mean(-1, keepdim=True), lambda g: (randn(g, 40, 1001),), "aten.mean.dim")
case("big_argmax", lambda x: x.argmax(-1), lambda g: (randn(g, 37, 1029),), "aten.argmax.default")
case("big_softmax", lambda x: torch.softmax(x, -1), lambda g: (randn(g, 33, 1031),), "aten._softmax.default")
case("big_layer_norm", lambda x, w, b: F.layer_norm(x, (1025,), w, b), lambda g: (randn(g, 33, 1025), randn(g, 1025), randn(g, 1025)), "aten.native_layer_norm.default")
case("big_conv2d", lambda x, w, b: F.conv2d(x, w, b, padding=1), lambda g: (randn(g, 2, 17, 19, 23), randn(g, 13, 17, 3, 3), randn(g, 13)), "aten.convolution.default")
case("big_max_pool2d", lambda x: F.max_pool2d(x, 3, 2), lambda g: (randn(g, 2, 8, 45, 47),), "aten.max_pool2d_with_indices.default")
case("big_cat", lambda x, y: torch.cat([x, y], 1), lambda g: (randn(g, 40, 700), transposed(randn(g, 40, 333))), "aten.cat.default")

# ---- unusual input layouts and modules with weights ------------------------------------------

case("input_storage_offset", lambda x, y: x * y, lambda g: (randn(g, 6, 9)[1:4, 2:7], randn(g, 8, 5)[3:6]), "aten.mul.Tensor")
case("input_expanded_stride0", lambda x: x.exp() + 1, lambda g: (randn(g, 5, 1).expand(5, 7),), "aten.exp.default")
case("input_same_tensor_twice", lambda x, y: x - y * 2, lambda g: (lambda t: (t, t))(randn(g, 4, 5)), "aten.sub.Tensor")
case("input_negative_offset_view_i64", lambda x: x.sum(-1), lambda g: (randint(g, 7, 8)[2:, 1::3],), "aten.sum.dim_IntList")
case("max_pool2d_channels_last", lambda x: F.max_pool2d(x, 2), lambda g: (randn(g, 2, 3, 6, 7).to(memory_format=torch.channels_last),), "aten.max_pool2d_with_indices.default")
case("module_linear", module(lambda: torch.nn.Linear(5, 7)), lambda g: (randn(g, 2, 3, 5),), "aten.addmm.default")
case("module_conv_bn_relu", module(lambda: torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU())), lambda g: (randn(g, 2, 3, 5, 7),), ("aten.convolution.default", "aten._native_batch_norm_legit_no_training.default", "aten.relu.default"))
case("module_layer_norm", module(lambda: torch.nn.LayerNorm(7)), lambda g: (randn(g, 3, 5, 7),), "aten.native_layer_norm.default")
case("module_embedding", module(lambda: torch.nn.Embedding(11, 6)), lambda g: (randint(g, 3, 4, lo=0, hi=11),), "aten.embedding.default")

# ---- small compositions (several ops in one region) -------------------------------------------

case("mlp_block", lambda x, w, b: F.gelu(F.linear(x, w, b)) * torch.sigmoid(x.sum(-1, keepdim=True)), lambda g: (randn(g, 3, 5), randn(g, 5, 5), randn(g, 5)), ("aten.addmm.default", "aten.gelu.default", "aten.sum.dim_IntList"))
case("rms_norm", lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, lambda g: (randn(g, 3, 5, 7), randn(g, 7)), ("aten.rsqrt.default", "aten.mean.dim", "aten.pow.Tensor_Scalar"))
case("attention_math", lambda q, k, v: torch.softmax(q @ k.transpose(-1, -2) * 0.25, -1) @ v, lambda g: (randn(g, 2, 5, 8), randn(g, 2, 7, 8), randn(g, 2, 7, 4)), ("aten.bmm.default", "aten._softmax.default"))
case("masked_fill", lambda x, m: x.masked_fill(m, -1.0), lambda g: (randn(g, 3, 5, 7), randbool(g, 5, 7)), ("aten.where.self",))
case("mixed_int_float_chain", lambda x, i: (x * i + i.float()).to(f16).sum(0), lambda g: (randn(g, 4, 5), randint(g, 4, 5)), ("aten.mul.Tensor", "aten._to_copy.default", "aten.sum.dim_IntList"))


# ---- ops the model zoo needs (tests/python/test_zoo.py) --------------------------------------

case("bitwise_and_bool_masks", lambda x, y: x & y, lambda g: (randbool(g, 4, 1), randbool(g, 1, 5)), "aten.bitwise_and.Tensor")
case("bitwise_or_not_bool", lambda x, y: ~(x | y), lambda g: (randbool(g, 4, 5), randbool(g, 5)), ("aten.bitwise_or.Tensor", "aten.bitwise_not.default"))
case("bitwise_and_int_falls_back", lambda x, y: x & y, lambda g: (randint(g, 4, 5), randint(g, 5)), (), fallback={"aten.bitwise_and.Tensor": "bool only"})
case("cumsum_f32_dim1", lambda x: torch.cumsum(x, 1), lambda g: (transposed(randn(g, 5, 6)),), "aten.cumsum.default")
case("cumsum_bool_to_i64", lambda x: torch.cumsum(x, -1), lambda g: (randbool(g, 3, 7),), "aten.cumsum.default")
case("cumsum_i32_dtype_f64", lambda x: torch.cumsum(x, 0, dtype=f64), lambda g: (randint(g, 4, 3, dtype=i32),), "aten.cumsum.default")
case("fmod_scalar_f32", lambda x: aten.fmod.Scalar(x, 1.5), lambda g: (randn(g, 3, 5),), "aten.fmod.Scalar", direct=True)
case("fmod_scalar_i64", lambda x: aten.fmod.Scalar(x, -3), lambda g: (randint(g, 4, 5),), "aten.fmod.Scalar", direct=True)
case("fmod_tensor_f32", lambda x, y: torch.fmod(x, y), lambda g: (randn(g, 3, 5), positive(g, 5)), "aten.fmod.Tensor")
case("fmod_tensor_i64_falls_back", lambda x, y: torch.fmod(x, y), lambda g: (randint(g, 3, 5), randint(g, 5, lo=1, hi=4)), (), fallback={"aten.fmod.Tensor": "nonzero constant"})
case("index_two_tensors_broadcast", lambda x, i, j: x[i, j], lambda g: (randn(g, 4, 6, 3), randint(g, 3, 1, lo=-4, hi=4), randint(g, 5, lo=-6, hi=6)), "aten.index.Tensor")
case("index_after_slice", lambda x, i: x[:, i], lambda g: (randn(g, 3, 6, 2), randint(g, 2, 4, lo=-6, hi=6)), "aten.index.Tensor")
case("index_two_after_two_slices", lambda x, i, j: x[:, :, i, j], lambda g: (randn(g, 2, 3, 4, 5, 2), randint(g, 3, lo=0, hi=4), randint(g, 1, lo=-5, hi=5)), "aten.index.Tensor")
case("index_after_slice_direct", lambda x, i: aten.index.Tensor(x, [None, i]), lambda g: (transposed(randn(g, 5, 4)), randint(g, 7, lo=0, hi=4)), "aten.index.Tensor", direct=True)
case("index_one_tensor_i32", lambda x, i: x[i], lambda g: (randn(g, 5, 2), randint(g, 2, 3, lo=0, hi=5, dtype=i32)), "aten.index.Tensor")
