// Attention op declaration: attention(q, k, v, [mask]), softmax(q k^T * scale
// + mask) v without the score matrix as a value.
// q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev]. Batch dims of
// q, k, v and the mask broadcast (torch's math path goes through matmul, which
// broadcasts). Grouped-query attention: the last batch dim (heads, of rank >= 3
// operands) of k and v may be a divisor Hk of q's Hq; query head h then reads
// key/value head h / (Hq / Hk), like torch's enable_gqa (repeat_interleave).
// mask is bool (true = attend) or additive with q's dtype, broadcastable to
// [..., L, S]. Attributes:
//   causal  top-left aligned causal mask (query i sees keys j <= i), like torch
//   scale   0 means 1 / sqrt(E)
//   heads_last  the output is [..., L, H, Ev] instead of [..., H, L, Ev] (H the
//               last batch dim), written in place of a transpose-and-copy
//               that would follow (fuse_attention makes it)
// Note [Fully masked rows]: a query row whose every score is -inf (all keys
// masked) gives zeros, matching torch >= 2.5's math path (_safe_softmax) and
// its CPU flash kernel, not the NaN that a plain softmax would give.
#include <algorithm>
#include <string>
#include <vector>

#include "ops/attention_shape.h"
#include "ops/broadcast.h"
#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln {

namespace {

std::string shape_text(const TensorType& t) { return str_cat("[", dims_to_string(t.dims), "]"); }

Dims leading(const Dims& d, size_t drop) { return Dims(d.begin(), d.end() - static_cast<std::ptrdiff_t>(drop)); }

}  // namespace

Dims attention_batch_dims(const Dims& q, const Dims& k, const Dims& v) {
  Dims bq = leading(q, 2), bk = leading(k, 2), bv = leading(v, 2);
  const size_t rank = std::max({bq.size(), bk.size(), bv.size()});
  auto pad = [&](Dims d) {
    d.insert(d.begin(), rank - d.size(), 1);
    return d;
  };
  bq = pad(bq), bk = pad(bk), bv = pad(bv);
  Dims out(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t a = bq[d], b = bk[d], c = bv[d];
    const bool heads = d + 1 == rank;
    int64_t n = 1;
    for (int64_t x : {a, b, c}) n = x != 1 ? x : n;
    if (heads && a != 1) n = a;  // GQA: q's head count wins over its divisors in k and v
    for (int64_t x : {b, c}) {
      const bool ok = x == 1 || x == n || (heads && x != 0 && n % x == 0);
      KILN_CHECK(ok, "batch dims of q [", dims_to_string(q), "], k [", dims_to_string(k), "] and v [",
                 dims_to_string(v), "] do not broadcast (k/v heads must equal, divide or be 1 for q's heads)");
    }
    KILN_CHECK(a == 1 || a == n, "batch dims of q [", dims_to_string(q), "], k [", dims_to_string(k), "] and v [",
               dims_to_string(v), "] do not broadcast");
    out[d] = n;
  }
  return out;
}

Dims attention_output_batch(const Dims& out, bool heads_last) {
  Dims batch = leading(out, 2);
  if (heads_last) batch.back() = out[out.size() - 2];  // [..., L, H, Ev]: H sits where L would
  return batch;
}

int64_t attention_batch_index(int64_t out_index, int64_t out_dim, int64_t operand_dim) {
  if (operand_dim == 1) return 0;
  if (operand_dim == out_dim) return out_index;
  return out_index / (out_dim / operand_dim);  // grouped-query heads
}

namespace ops_internal {

namespace {

std::vector<TensorType> infer_attention(std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& q = in[0];
  const TensorType& k = in[1];
  const TensorType& v = in[2];
  KILN_CHECK(q.rank() >= 2 && k.rank() >= 2 && v.rank() >= 2, "q, k and v need at least 2 dims, got ",
             shape_text(q), ", ", shape_text(k), ", ", shape_text(v));
  KILN_CHECK(is_floating(q.dtype), "needs floating-point q, got ", dtype_name(q.dtype));
  KILN_CHECK(k.dtype == q.dtype && v.dtype == q.dtype, "q, k and v must share one dtype, got ",
             dtype_name(q.dtype), ", ", dtype_name(k.dtype), ", ", dtype_name(v.dtype));
  int64_t L = q.dims[q.rank() - 2], E = q.dims.back();
  int64_t S = k.dims[k.rank() - 2];
  KILN_CHECK(k.dims.back() == E, "k's last dim ", k.dims.back(), " must equal q's ", E, " (q ", shape_text(q),
             ", k ", shape_text(k), ")");
  KILN_CHECK(v.dims[v.rank() - 2] == S, "v ", shape_text(v), " must have k's sequence length ", S);
  Dims batch = attention_batch_dims(q.dims, k.dims, v.dims);
  if (in.size() == 4) {
    const TensorType& mask = in[3];
    KILN_CHECK(mask.dtype == DType::boolean || mask.dtype == q.dtype, "mask must be bool or ", dtype_name(q.dtype),
               " (q's dtype), got ", dtype_name(mask.dtype));
    KILN_CHECK(!attrs.get_bool("causal"), "an explicit mask cannot be combined with causal=true");
    Dims target = batch;
    target.push_back(L);
    target.push_back(S);
    bool fits = mask.rank() <= target.size();
    for (size_t d = 0; fits && d < mask.rank(); ++d) {
      int64_t m = mask.dims[mask.rank() - 1 - d];
      fits = m == 1 || m == target[target.size() - 1 - d];
    }
    KILN_CHECK(fits, "mask ", shape_text(mask), " does not broadcast to [", dims_to_string(target), "]");
  }
  Dims out = batch;
  out.push_back(L);
  out.push_back(v.dims.back());
  if (attrs.get_bool("heads_last")) {
    KILN_CHECK(!batch.empty(), "heads_last needs a heads dim: q, k and v have no batch dims");
    std::swap(out[out.size() - 3], out[out.size() - 2]);
  }
  return {TensorType(q.dtype, out)};
}

}  // namespace

void register_attention_ops(OpList& ops) {
  OpDef op;
  op.name = "attention";
  op.inputs = {"q", "k", "v", "mask"};
  op.optional_inputs = 1;
  op.attrs = {{"causal", AttrKind::bool_, false},
              {"scale", AttrKind::float_, 0.0},
              {"heads_last", AttrKind::bool_, false}};
  op.infer = infer_attention;
  // Adapters (src/builder/aten_attention.cpp) handle their extra arguments and outputs.
  op.aten = {"aten.scaled_dot_product_attention.default",
             "aten._scaled_dot_product_attention_math.default",
             "aten._scaled_dot_product_flash_attention_for_cpu.default",
             "aten._scaled_dot_product_flash_attention.default",
             "aten._scaled_dot_product_efficient_attention.default",
             "aten._scaled_dot_product_cudnn_attention.default",
             "aten._scaled_dot_product_fused_attention_overrideable.default"};
  ops.push_back(std::move(op));
}

}  // namespace ops_internal

}  // namespace kiln
