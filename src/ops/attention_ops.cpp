// Attention op declaration: scaled_dot_product_attention(q, k, v, [mask]).
// q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev]; batch dims of
// q, k, v and the mask broadcast (torch's math path goes through matmul, which
// broadcasts). mask is bool (true = attend) or additive with q's dtype,
// broadcastable to [..., L, S]. Attributes:
//   causal  top-left aligned causal mask (query i sees keys j <= i), like torch
//   scale   0 means 1 / sqrt(E)
// Note [Fully masked rows]: a query row whose every score is -inf (all keys
// masked) gives zeros, matching torch >= 2.5's math path (_safe_softmax) and
// its CPU flash kernel, not the NaN that a plain softmax would give.
#include <string>
#include <vector>

#include "ops/broadcast.h"
#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::ops_internal {

namespace {

std::string shape_text(const TensorType& t) { return str_cat("[", dims_to_string(t.dims), "]"); }

Dims leading(const TensorType& t, size_t keep) {
  return Dims(t.dims.begin(), t.dims.end() - static_cast<std::ptrdiff_t>(keep));
}

std::vector<TensorType> infer_sdpa(std::span<const TensorType> in, const Attrs& attrs) {
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
  std::vector<Dims> batches = {leading(q, 2), leading(k, 2), leading(v, 2)};
  Dims batch = broadcast_dims(batches);
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
  return {TensorType(q.dtype, out)};
}

}  // namespace

void register_attention_ops(OpList& ops) {
  OpDef sdpa;
  sdpa.name = "scaled_dot_product_attention";
  sdpa.inputs = {"q", "k", "v", "mask"};
  sdpa.optional_inputs = 1;
  sdpa.attrs = {{"causal", AttrKind::bool_, false}, {"scale", AttrKind::float_, 0.0}};
  sdpa.infer = infer_sdpa;
  // Not enable_gqa (the frontend maps GQA only after expanding k and v) and no dropout.
  sdpa.aten = {"aten.scaled_dot_product_attention.default"};
  ops.push_back(std::move(sdpa));
}

}  // namespace kiln::ops_internal
