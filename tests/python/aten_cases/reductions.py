"""ATen op cases: reductions, any and all."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: F401 - used by some families

from aten_cases.common import *  # noqa: F401,F403 - the case vocabulary: case, randn, dtypes, ...

# ---- reductions ---------------------------------------------------------------------------

case("sum_all", lambda x: x.sum(), lambda g: (randn(g, 3, 5, 7),), "aten.sum.dim_IntList")
case("sum_dims_keepdim", lambda x: x.sum(dim=(0, -1), keepdim=True), lambda g: (randn(g, 3, 5, 7),), "aten.sum.dim_IntList")
case("sum_neg_dim_transposed", lambda x: x.sum(-2), lambda g: (transposed(randn(g, 5, 7)),), "aten.sum.dim_IntList")
case("sum_f16", lambda x: x.sum(1), lambda g: (randn(g, 3, 5, 7, dtype=f16),), "aten.sum.dim_IntList")
case("sum_i64", lambda x: x.sum(0), lambda g: (randint(g, 5, 7),), "aten.sum.dim_IntList")
case("sum_i32_promotes", lambda x: x.sum(-1), lambda g: (randint(g, 5, 7, dtype=i32),), "aten.sum.dim_IntList")
case("sum_bool_counts", lambda x: x.sum(1, keepdim=True), lambda g: (randbool(g, 4, 9),), "aten.sum.dim_IntList")
case("sum_dtype_f64", lambda x: x.sum(0, dtype=f64), lambda g: (randn(g, 5, 7),), "aten.sum.dim_IntList")
case("mean_all", lambda x: x.mean(), lambda g: (randn(g, 3, 5, 7),), "aten.mean.default")
case("mean_dims_keepdim", lambda x: x.mean((1, -1), keepdim=True), lambda g: (randn(g, 3, 5, 7),), "aten.mean.dim")
case("mean_bf16_sliced", lambda x: x.mean(-1), lambda g: (strided(randn(g, 4, 9, dtype=bf16)),), "aten.mean.dim")
case("mean_f64", lambda x: x.mean(0), lambda g: (randn(g, 5, 7, dtype=f64),), "aten.mean.dim")
case("amax_keepdim", lambda x: x.amax(-1, keepdim=True), lambda g: (randn(g, 3, 5, 7),), "aten.amax.default")
case("amax_multi_i64", lambda x: x.amax((0, 2)), lambda g: (randint(g, 3, 5, 7),), "aten.amax.default")
case("amin_transposed_f16", lambda x: x.amin(0), lambda g: (transposed(randn(g, 5, 7, dtype=f16)),), "aten.amin.default")
case("amin_i32", lambda x: x.amin(-1), lambda g: (randint(g, 4, 7, dtype=i32),), "aten.amin.default")
case("var_unbiased", lambda x: x.var(-1), lambda g: (randn(g, 3, 5, 7),), "aten.var.correction")
case("var_correction0_keepdim", lambda x: torch.var(x, (0, 1), correction=0, keepdim=True), lambda g: (randn(g, 3, 5, 7),), "aten.var.correction")
case("var_all_f64", lambda x: x.var(), lambda g: (randn(g, 4, 6, dtype=f64),), "aten.var.correction")
case("std_via_var", lambda x: x.std(1), lambda g: (randn(g, 3, 5, 7),), ("aten.var.correction", "aten.sqrt.default"))
case("argmax_all", lambda x: x.argmax(), lambda g: (randn(g, 3, 5, 7),), "aten.argmax.default")
case("argmax_dim_keepdim", lambda x: x.argmax(-1, keepdim=True), lambda g: (randn(g, 3, 5, 7),), "aten.argmax.default")
case("argmax_i64_ties", lambda x: x.argmax(0), lambda g: (randint(g, 6, 5, lo=0, hi=3),), "aten.argmax.default")
case("argmin_dim", lambda x: x.argmin(1), lambda g: (transposed(randn(g, 5, 7)),), "aten.argmin.default")
case("argmin_f16_ties", lambda x: x.argmin(-1), lambda g: (randint(g, 4, 9, lo=0, hi=3).to(f16),), "aten.argmin.default")
case("max_dim", lambda x: torch.max(x, 1), lambda g: (randn(g, 3, 5, 7),), "aten.max.dim")
case("max_dim_keepdim_neg", lambda x: torch.max(x, -1, keepdim=True), lambda g: (randint(g, 3, 5, lo=0, hi=3),), "aten.max.dim")
case("max_dim_values_only", lambda x: torch.max(x, 0).values * 2, lambda g: (randn(g, 5, 7),), "aten.max.dim")
case("min_dim", lambda x: torch.min(x, 0), lambda g: (randn(g, 5, 7, dtype=f64),), "aten.min.dim")
case("min_dim_keepdim_f16", lambda x: torch.min(x, -2, keepdim=True), lambda g: (transposed(randn(g, 4, 6, dtype=f16)),), "aten.min.dim")
case("max_all_falls_back", lambda x: x.max(), lambda g: (randn(g, 3, 5, 7),), (), fallback={"aten.max.default": "no kiln lowering"})
case("mean_default_dtype_direct", lambda x: aten.mean.default(x, dtype=f64), lambda g: (randn(g, 3, 5),), "aten.mean.default", direct=True)
case("sum_default_direct", lambda x: aten.sum.default(x), lambda g: (randint(g, 3, 5, dtype=i32),), "aten.sum.default", direct=True)

# ---- any / all ---------------------------------------------------------------------------

case("any_dim_bool", lambda x: x.any(-1), lambda g: (torch.rand(4, 5, generator=g) < 0.2,), "aten.any.dim")
case("any_dims_keepdim_f32", lambda x: torch.any(x, dim=(0, 2), keepdim=True), lambda g: (randint(g, 3, 5, 7, lo=0, hi=2).float() * (torch.rand(3, 5, 7, generator=g) < 0.1),), "aten.any.dims")
case("any_all_i64", lambda x: x.any(), lambda g: (randint(g, 4, 6, lo=0, hi=2) * 0,), "aten.any.default")
case("any_transposed_f16", lambda x: x.any(0), lambda g: (transposed(randint(g, 5, 6, lo=-1, hi=2).to(f16)),), "aten.any.dim")
case("all_dim_i32", lambda x: x.all(1), lambda g: (randint(g, 4, 5, lo=0, hi=3, dtype=i32),), ("aten.any.dim", "aten.logical_not.default"))
case("all_dims_bool", lambda x: torch.all(x, dim=(-1, -2)), lambda g: (torch.rand(3, 2, 4, generator=g) < 0.9,), ("aten.any.dims", "aten.logical_not.default"))
case("all_default_nan_is_true", lambda x: x.all(), lambda g: (torch.tensor([1.0, float("nan"), -2.0]),), "aten.any.dims")
case("all_dim_direct", lambda x: aten.all.dim(x, -1, True), lambda g: (randint(g, 3, 5, lo=0, hi=3),), "aten.all.dim", direct=True)
case("all_dims_direct", lambda x: aten.all.dims(x, [0, 2]), lambda g: (torch.rand(3, 4, 5, generator=g) < 0.8,), "aten.all.dims", direct=True)
case("all_default_direct", lambda x: aten.all.default(x), lambda g: (randbool(g, 3, 5),), "aten.all.default", direct=True)
case("any_default_direct", lambda x: aten.any.default(x), lambda g: (randint(g, 3, 5, lo=0, hi=2),), "aten.any.default", direct=True)
case("full_like", lambda x: torch.full_like(x, 3.5) + x, lambda g: (randn(g, 3, 5, 7),), ("aten.full_like.default",))
case("full_like_dtype_direct", lambda x: aten.full_like.default(x, 7, dtype=i32), lambda g: (transposed(randn(g, 5, 6)),), "aten.full_like.default", direct=True)
case("zeros_like_ones_like", lambda x: torch.zeros_like(x) + torch.ones_like(x) * x, lambda g: (randint(g, 3, 5),), "aten.full_like.default")
case("sdpa_compiled", lambda q, k, v: F.scaled_dot_product_attention(q, k, v), lambda g: (randn(g, 1, 2, 5, 8), randn(g, 1, 2, 7, 8), randn(g, 1, 2, 7, 8)), ("aten._scaled_dot_product_flash_attention_for_cpu.default",))
case("sdpa_compiled_causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), lambda g: (randn(g, 1, 2, 6, 8), randn(g, 1, 2, 6, 8), randn(g, 1, 2, 6, 8)), ("aten._scaled_dot_product_flash_attention_for_cpu.default",))
