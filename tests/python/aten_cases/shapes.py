"""ATen op cases: views and reshapes, concatenation, splitting, padding, indexing and creation."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: F401 - used by some families

from aten_cases.common import *  # noqa: F401,F403 - the case vocabulary: case, randn, dtypes, ...

def _assign_slices(x):
    """Swin's shifted-window mask: a zero buffer whose slices get numbered in place, then used."""
    mask = torch.zeros(6, 6)
    count = 0
    for h in (slice(0, -3), slice(-3, -1), slice(-1, None)):
        for w in (slice(0, -3), slice(-3, -1), slice(-1, None)):
            mask[h, w] = count
            count += 1
    return x + mask


# ---- views and reshapes ---------------------------------------------------------

case("view", lambda x: x.view(5, 21) + 1, lambda g: (randn(g, 3, 5, 7),), "aten.view.default")
case("view_neg1_i64", lambda x: x.view(-1, 7) * 2, lambda g: (randint(g, 3, 5, 7),), "aten.view.default")
case("reshape_transposed", lambda x: x.reshape(-1) + 1, lambda g: (transposed(randn(g, 5, 7)),), ("aten.view.default",))
case("reshape_permuted_3d", lambda x: x.permute(2, 0, 1).reshape(7, 15), lambda g: (randn(g, 3, 5, 7),), ("aten.permute.default",))
case("reshape_direct", lambda x: aten.reshape.default(x, [7, -1]), lambda g: (transposed(randn(g, 5, 7)),), "aten.reshape.default", direct=True)
case("unsafe_view_direct", lambda x: aten._unsafe_view.default(x, [15, 7]), lambda g: (randn(g, 3, 5, 7),), "aten._unsafe_view.default", direct=True)
case("permute", lambda x: x.permute(2, 0, 1) * 1.0, lambda g: (randn(g, 3, 5, 7),), "aten.permute.default")
case("permute_neg_dims_f16", lambda x: x.permute(-1, -3, -2).contiguous(), lambda g: (randn(g, 3, 5, 7, dtype=f16),), "aten.permute.default")
case("t", lambda x: x.t() + 1, lambda g: (randn(g, 5, 7),), ("aten.permute.default",))
case("t_direct", lambda x: aten.t.default(x), lambda g: (randn(g, 5, 7),), "aten.t.default", direct=True)
case("t_1d_direct", lambda x: aten.t.default(x), lambda g: (randn(g, 7),), "aten.t.default", direct=True)
case("transpose_neg", lambda x: x.transpose(-1, 0) - 1, lambda g: (randn(g, 3, 5, 7),), ("aten.permute.default",))
case("transpose_direct", lambda x: aten.transpose.int(x, 0, -1), lambda g: (randn(g, 3, 5, 7),), "aten.transpose.int", direct=True)
case("expand", lambda x: x.expand(3, 5, 7) + 0, lambda g: (randn(g, 5, 1),), "aten.expand.default")
case("expand_neg1_i32", lambda x: x.expand(4, -1, 7) * 1, lambda g: (randint(g, 1, 5, 1, dtype=i32),), "aten.expand.default")
case("expand_output", lambda x: x.expand(3, 5, 7), lambda g: (randn(g, 5, 1),), "aten.expand.default")
case("repeat", lambda x: x.repeat(2, 3) + 0, lambda g: (randn(g, 5, 7),), "aten.repeat.default")
case("repeat_new_dims_transposed", lambda x: x.repeat(2, 1, 3), lambda g: (transposed(randn(g, 5, 7)),),
     "aten.repeat.default")
case("repeat_i64_zero", lambda x: x.repeat(0, 2), lambda g: (randint(g, 4),), "aten.repeat.default")
case("repeat_interleave_pairs", lambda x: x[:, None, :].repeat(1, 2, 1).flatten(1, 2), lambda g: (randn(g, 3, 8),),
     "aten.repeat.default")
case("slice_step", lambda x: x[:, 1::2] + 1, lambda g: (randn(g, 5, 7),), "aten.slice.Tensor")
case("slice_negative", lambda x: x[..., -4:-1] * 2, lambda g: (randn(g, 3, 5, 7),), "aten.slice.Tensor")
case("slice_of_transposed_i64", lambda x: x[1:4] + 1, lambda g: (transposed(randint(g, 5, 6)),), "aten.slice.Tensor")
case("slice_end_past", lambda x: x[2:100] * 1, lambda g: (randn(g, 5, 3),), "aten.slice.Tensor")
case("select", lambda x: x[:, 2] + 1, lambda g: (randn(g, 3, 5, 7),), "aten.select.int")
case("select_negative", lambda x: x[..., -1] * 2, lambda g: (randn(g, 3, 5, 7, dtype=bf16),), "aten.select.int")
case("squeeze_dim", lambda x: x.squeeze(1) + 1, lambda g: (randn(g, 3, 1, 7),), "aten.squeeze.dims")
case("squeeze_neg_dim", lambda x: x.squeeze(-1) + 1, lambda g: (randn(g, 3, 5, 1),), "aten.squeeze.dims")
case("squeeze_dims", lambda x: x.squeeze((0, -1)) + 1, lambda g: (randn(g, 1, 5, 1),), ("aten.squeeze.dims",))
case("squeeze_all", lambda x: x.squeeze() + 1, lambda g: (randn(g, 1, 5, 1, 7),), ("aten.squeeze.dims",))
case("squeeze_dim_direct", lambda x: aten.squeeze.dim(x, -2), lambda g: (randn(g, 3, 1, 7),), "aten.squeeze.dim", direct=True)
case("squeeze_default_direct", lambda x: aten.squeeze.default(x), lambda g: (randn(g, 1, 5, 1, 7),), "aten.squeeze.default", direct=True)
case("unsqueeze", lambda x: x.unsqueeze(1) + 1, lambda g: (randn(g, 3, 7),), "aten.unsqueeze.default")
case("unsqueeze_neg", lambda x: x.unsqueeze(-1) * x.unsqueeze(0), lambda g: (randn(g, 5),), "aten.unsqueeze.default")

# ---- concatenation, splitting, padding, indexing ------------------------------------

case("cat_dim0", lambda x, y: torch.cat([x, y]), lambda g: (randn(g, 2, 5), randn(g, 3, 5)), "aten.cat.default")
case("cat_neg_dim_3", lambda x, y, z: torch.cat([x, y, z], dim=-1), lambda g: (randn(g, 3, 5, 2), randn(g, 3, 5, 1), transposed(randn(g, 3, 5, 4))), "aten.cat.default")
case("cat_mixed_dtypes", lambda x, y: torch.cat([x, y], 1), lambda g: (randint(g, 3, 2, dtype=i32), randn(g, 3, 4, dtype=f16)), "aten.cat.default")
case("cat_bool", lambda x, y: torch.cat([x, y], 0), lambda g: (randbool(g, 2, 5), randbool(g, 1, 5)), "aten.cat.default")
case("cat_empty_1d", lambda x, e: torch.cat([x, e]) * 2, lambda g: (randn(g, 3, 5), torch.empty(0)), "aten.cat.default")
case("split_equal", lambda x: [t + 1 for t in torch.split(x, 2, dim=1)], lambda g: (randn(g, 3, 5, 7),), "aten.split_with_sizes.default")
case("split_neg_dim", lambda x: [t * 2 for t in x.split(3, dim=-1)], lambda g: (randn(g, 3, 7),), "aten.split_with_sizes.default")
case("split_direct", lambda x: tuple(aten.split.Tensor(x, 3, -1)[i] for i in range(3)), lambda g: (randn(g, 3, 7),), "aten.split.Tensor", direct=True)
case("split_with_sizes", lambda x: [t + 1 for t in torch.split(x, [1, 4, 2], dim=-1)], lambda g: (randn(g, 3, 5, 7),), "aten.split_with_sizes.default")
case("split_with_sizes_i64", lambda x: [t * 2 for t in torch.split(x, [2, 3], dim=0)], lambda g: (randint(g, 5, 4),), "aten.split_with_sizes.default")
case("slice_scatter_middle", lambda x, s: aten.slice_scatter.default(x, s, 1, 2, 5), lambda g: (randn(g, 3, 7), randn(g, 3, 3)), "aten.slice_scatter.default", direct=True)
case("slice_scatter_negative_end_i64", lambda x, s: aten.slice_scatter.default(x, s, -1, 0, -2), lambda g: (randint(g, 2, 3, 6), randint(g, 2, 3, 4)), "aten.slice_scatter.default", direct=True)
case("slice_scatter_whole_f16", lambda x, s: aten.slice_scatter.default(x, s, 0), lambda g: (randn(g, 4, 5, dtype=f16), transposed(randn(g, 4, 5, dtype=f16))), "aten.slice_scatter.default", direct=True)
case("slice_assignment", lambda x: _assign_slices(x), lambda g: (randn(g, 6, 6),), ("aten.slice_scatter.default",))
case("copy_broadcast", lambda x, s: aten.copy.default(x, s), lambda g: (randn(g, 3, 5), randn(g, 5)), "aten.copy.default", direct=True)
case("copy_cast_i32", lambda x, s: aten.copy.default(x, s), lambda g: (randint(g, 4, 2, dtype=i32), randn(g, 4, 2)), "aten.copy.default", direct=True)
case("unbind", lambda x: [t + 1 for t in torch.unbind(x, 1)], lambda g: (randn(g, 3, 4, 5),), ("aten.slice.Tensor", "aten.squeeze.dims"))
case("unbind_direct", lambda x: tuple(aten.unbind.int(x, -1)[i] for i in range(4)), lambda g: (randn(g, 3, 4),), "aten.unbind.int", direct=True)
case("pad_2d", lambda x: F.pad(x, (1, 2, 0, 3), value=0.5), lambda g: (randn(g, 3, 5, 7),), "aten.constant_pad_nd.default")
case("pad_negative_i64", lambda x: F.pad(x, (-1, 2)), lambda g: (randint(g, 3, 5),), "aten.constant_pad_nd.default")
case("pad_transposed_f16", lambda x: F.pad(x, (2, 0)), lambda g: (transposed(randn(g, 5, 6, dtype=f16)),), "aten.constant_pad_nd.default")
case("gather", lambda x, i: torch.gather(x, 1, i), lambda g: (randn(g, 3, 5, 7), randint(g, 3, 4, 7, lo=0, hi=5)), "aten.gather.default")
case("gather_neg_dim_i64", lambda x, i: torch.gather(x, -1, i), lambda g: (randint(g, 4, 6), randint(g, 4, 3, lo=0, hi=6)), "aten.gather.default")
case("index_select", lambda x, i: torch.index_select(x, 0, i), lambda g: (randn(g, 5, 7), torch.tensor([4, 0, 2, 2])), "aten.index_select.default")
case("index_select_neg_dim_i32idx", lambda x, i: torch.index_select(x, -1, i), lambda g: (transposed(randn(g, 5, 7)), torch.tensor([6, 1, 1], dtype=i32)), "aten.index_select.default")
case("embedding", lambda w, i: F.embedding(i, w), lambda g: (randn(g, 10, 6), randint(g, 3, 4, lo=0, hi=10)), "aten.embedding.default")
case("embedding_f16_i32", lambda w, i: F.embedding(i, w), lambda g: (randn(g, 9, 5, dtype=f16), randint(g, 7, lo=0, hi=9, dtype=i32)), "aten.embedding.default")
case("embedding_padding_idx_direct", lambda w, i: aten.embedding.default(w, i, 2), lambda g: (randn(g, 9, 5), randint(g, 3, 4, lo=0, hi=9)), "aten.embedding.default", direct=True)

# ---- creation -------------------------------------------------------------------------

case("full", lambda x: x + torch.full((3, 5), 2.5), lambda g: (randn(g, 3, 5),), "aten.full.default")
case("full_int", lambda x: x * torch.full((5,), 3), lambda g: (randint(g, 3, 5),), "aten.full.default")
case("full_bool_output", lambda x: torch.full((2, 3), True), lambda g: (randn(g, 2),), "aten.full.default")
case("full_direct_f16", lambda x: aten.add.Tensor(aten.full.default([3, 5], 1.5, dtype=f16), x), lambda g: (randn(g, 3, 5, dtype=f16),), "aten.full.default", direct=True, dispatch=True)
case("scalar_tensor_direct", lambda x: aten.mul.Tensor(x, aten.scalar_tensor.default(3.0)), lambda g: (randn(g, 3, 5),), "aten.scalar_tensor.default", direct=True, dispatch=True)
case("scalar_tensor_dtype_direct", lambda x: aten.add.Tensor(x, aten.scalar_tensor.default(2, dtype=i64)), lambda g: (randint(g, 3, 5),), "aten.scalar_tensor.default", direct=True, dispatch=True)
case("arange_end", lambda x: x + torch.arange(7), lambda g: (randn(g, 3, 7),), "aten.arange.start_step")
case("arange_start_step", lambda x: x * torch.arange(1, 14, 2), lambda g: (randint(g, 3, 7),), ("aten.arange.start_step",))
case("arange_float_step", lambda x: x + torch.arange(0.5, 3.0, 0.5), lambda g: (randn(g, 5),), ("aten.arange.start_step",))
case("arange_default_direct", lambda x: aten.add.Tensor(x, aten.arange.default(5, dtype=f32)), lambda g: (randn(g, 2, 5),), "aten.arange.default", direct=True, dispatch=True)
case("arange_start_direct", lambda x: aten.add.Tensor(x, aten.arange.start(2, 7)), lambda g: (randint(g, 5),), "aten.arange.start", direct=True, dispatch=True)
case("arange_start_step_direct", lambda x: aten.add.Tensor(x, aten.arange.start_step(10, 0, -3)), lambda g: (randint(g, 4),), "aten.arange.start_step", direct=True, dispatch=True)
