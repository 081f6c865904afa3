// fuse_attention: softmax(Q K^T * scale [+ mask]) V, spelled out as matmul,
// softmax and matmul (how core ATen decomposes scaled_dot_product_attention,
// and how models write it by hand), becomes one `attention` node, which never
// holds the [L, S] scores as a value.
//
// The match starts at a softmax over the last dim and walks back from each
// matmul operand through what changes neither the operand's values nor the
// pairing of batch entries: reshapes and expands that keep the last two dims
// (an expand only to the scores' batch dims), contiguous copies, multiplies
// and divides by scalar literals (they become the scale), and permutes that
// swap the last two dims. An operand whose batch dims are the scores' merged
// or split differently (torch's multi-head attention multiplies [B*H, L, E]
// operands into [B, H, L, S] scores) is read through a reshape, when one can
// view it so. The grouped-query spelling (k unsqueezed, expanded
// over a group dim and reshaped into q's heads) becomes grouped heads. An
// additive mask is an add after the scaling. torch's safe softmax, where(all
// scores -inf, 0, softmax), is recognised; it is what attention computes
// (Note [Fully masked rows]). A plain softmax fuses only without a mask, where
// no row can be fully masked. Nothing fuses when the scores or probabilities
// have other users.
//
// An attention whose only use is contiguous(permute(., swap of the heads dim
// and L)), the "merge heads" of multi-head attention before the output
// projection, becomes attention {heads_last=true}, which writes that layout
// itself: the transpose copy goes away. A permute that puts the heads dim
// right before Ev in another order (torchvision's [L, B, H, Ev]) also reads
// the heads_last output, through a permute of its leading dims
// (matmul_row_order then removes that copy too).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "ir/literal.h"
#include "ops/broadcast.h"
#include "ops/op_def.h"
#include "ops/view_offset.h"
#include "passes/passes.h"
#include "passes/rewrite.h"
#include "support/error.h"

namespace kiln {

namespace {

std::optional<double> scalar_literal(const Value* v) {
  if (v->kind != ValueKind::literal || v->type.numel() != 1) return std::nullopt;
  return load_scalar(v->literal_data.data(), v->type.dtype);
}

bool all_equal_constant(const Value* v, double value) {
  if (v->kind == ValueKind::literal) {
    const size_t size = dtype_size(v->type.dtype);
    for (size_t off = 0; off + size <= v->literal_data.size(); off += size)
      if (load_scalar(v->literal_data.data() + off, v->type.dtype) != value) return false;
    return true;
  }
  const Node* full = producer_of(v, "full");
  return full != nullptr && full->attrs.get_float("value") == value;
}

Dims last2(const Dims& d) { return Dims(d.end() - 2, d.end()); }
Dims batch_of(const Dims& d) { return Dims(d.begin(), d.end() - 2); }

Dims drop_leading_ones(Dims d) {
  while (!d.empty() && d.front() == 1) d.erase(d.begin());
  return d;
}

bool swaps_last_two(const std::vector<int64_t>& perm) {
  const int64_t r = static_cast<int64_t>(perm.size());
  if (r < 2) return false;
  for (int64_t i = 0; i < r - 2; ++i)
    if (perm[static_cast<size_t>(i)] != i) return false;
  return perm[static_cast<size_t>(r - 2)] == r - 1 && perm[static_cast<size_t>(r - 1)] == r - 2;
}

// One matmul operand traced back to its source.
struct Source {
  Value* value = nullptr;
  double scale = 1.0;
  bool transposed = false;  // value holds the operand's last two dims swapped
  bool grouped = false;     // value's last batch dim is a grouped-query head count
};

// x * c, c * x or x / c with c a scalar literal and no broadcast or promotion, also in the builder's f32
// form for an f16/bf16 x (Note [Scalars in f16 and bf16]; LLaMA's 128**-0.5 is one).
std::optional<std::pair<Value*, double>> scalar_factor(const Node* n) {
  if (n->op->name == "cast") {
    const WidenedScalarOp w = widened_scalar_op(n->outputs[0]);
    auto f = w.op != nullptr ? scalar_factor(w.op) : std::nullopt;
    if (f) f->first = w.x;
    return f;
  }
  const std::string& op = n->op->name;
  if ((op != "mul" && op != "div") || n->inputs.size() != 2) return std::nullopt;
  const TensorType& out = n->outputs[0]->type;
  for (size_t i = 0; i < 2; ++i) {
    if (op == "div" && i == 0) continue;  // c / x is not a scaling
    auto c = scalar_literal(n->inputs[i]);
    Value* x = n->inputs[1 - i];
    if (!c || x->type.dtype != out.dtype || x->type.dims != out.dims) continue;
    if (op == "div" && *c == 0.0) return std::nullopt;
    return std::make_pair(x, op == "mul" ? *c : 1.0 / *c);
  }
  return std::nullopt;
}

// Walks back from a matmul operand (rank >= 2); `batch` is the scores' batch dims.
Source trace(Value* v, const Dims& batch) {
  Source s{v};
  while (Node* n = s.value->producer) {
    const std::string& op = n->op->name;
    const TensorType& out = s.value->type;
    Value* x = n->inputs.empty() ? nullptr : n->inputs[0];
    if (x == nullptr) break;
    const bool same_last2 = x->type.rank() >= 2 && out.rank() >= 2 && last2(x->type.dims) == last2(out.dims);
    if (op == "contiguous") {
      s.value = x;
    } else if (op == "reshape" && same_last2) {
      s.value = x;
    } else if (op == "expand" && same_last2 && !s.grouped &&
               drop_leading_ones(batch_of(out.dims)) == drop_leading_ones(batch)) {
      s.value = x;
    } else if (op == "expand" && same_last2 && !s.grouped && out.rank() == batch.size() + 3 && !batch.empty() &&
               x->type.rank() == out.rank()) {
      // Grouped-query heads: [..., Hk, G, S, E] expanded from [..., Hk, 1, S, E], then merged into
      // batch's [..., Hk * G]; head h reads h / G, like torch's repeat_interleave.
      const size_t r = out.rank();
      const int64_t hk = out.dims[r - 4], group = out.dims[r - 3];
      Dims lead(out.dims.begin(), out.dims.end() - 4);
      Dims want(batch.begin(), batch.end() - 1);
      if (x->type.dims[r - 3] != 1 || x->type.dims[r - 4] != hk || hk * group != batch.back() ||
          drop_leading_ones(lead) != drop_leading_ones(want))
        break;
      // The group dim of 1 comes from an unsqueeze (or a reshape) of the [..., Hk, S, E] source.
      Node* unsqueeze = x->producer;
      if (unsqueeze == nullptr || unsqueeze->inputs.empty() || unsqueeze->inputs[0]->type.rank() + 1 != r ||
          last2(unsqueeze->inputs[0]->type.dims) != last2(x->type.dims))
        break;
      const std::string& uop = unsqueeze->op->name;
      if (uop == "unsqueeze") {
        if (normalize_axis(unsqueeze->attrs.get_int("dim"), static_cast<int64_t>(r)) != static_cast<int64_t>(r) - 3)
          break;
      } else if (uop != "reshape") {
        break;
      }
      s.value = unsqueeze->inputs[0];
      s.grouped = true;
    } else if (auto f = scalar_factor(n)) {
      s.value = f->first;
      s.scale *= f->second;
    } else if (op == "permute" && swaps_last_two(n->attrs.get_ints("dims"))) {
      s.value = x;
      s.transposed = !s.transposed;
    } else {
      break;
    }
  }
  return s;
}

// Whether source's batch dims (right-aligned) broadcast to `batch`.
bool fits_batch(const Source& s, const Dims& batch) {
  const Dims b = batch_of(s.value->type.dims);
  if (b.size() > batch.size()) {
    for (size_t d = 0; d < b.size() - batch.size(); ++d)
      if (b[d] != 1) return false;
  }
  const size_t n = std::min(b.size(), batch.size());
  for (size_t i = 1; i <= n; ++i) {
    const int64_t have = b[b.size() - i], want = batch[batch.size() - i];
    if (have == 1 || have == want) continue;
    if (i == 1 && s.grouped && have > 0 && want % have == 0) continue;
    return false;
  }
  return true;
}

// `batch` followed by the source's last two dims: the source regrouped into the scores' batch dims.
Dims in_batch_dims(const Source& s, const Dims& batch) {
  Dims dims = batch;
  dims.insert(dims.end(), s.value->type.dims.end() - 2, s.value->type.dims.end());
  return dims;
}

// Whether the source's batch dims, merged or split differently (torch's multi-head attention reads v as
// [B*H, S, E] where the scores are [B, H, L, S]), can be viewed as `batch` by a reshape.
bool regroupable(const Source& s, const Dims& batch) {
  const TensorType& t = s.value->type;
  if (s.grouped || t.rank() < 2) return false;
  int64_t have = 1, want = 1;
  for (int64_t d : batch_of(t.dims)) have *= d;
  for (int64_t d : batch) want *= d;
  if (have != want || want <= 0) return false;
  Dims strides;
  return reshape_strides(t.dims, t.strides, in_batch_dims(s, batch), &strides);
}

// The source with `batch` as its batch dims: itself, or a reshape of it (regroupable).
Value* in_batch(Graph& g, const Source& s, const Dims& batch, const Node* before) {
  if (fits_batch(s, batch)) return s.value;
  return g.add_node(get_op("reshape"), {s.value}, reshape_attrs(in_batch_dims(s, batch)), "", before)->outputs[0];
}

// Scores before the mask: `x` traced through batch-only reshapes and scalar factors to a matmul.
struct Scores {
  Node* matmul = nullptr;
  double scale = 1.0;
};

std::optional<Scores> trace_scores(Value* x, const Graph& g) {
  Scores s;
  Value* v = x;
  for (;;) {
    Node* n = v->producer;
    if (n == nullptr) return std::nullopt;
    if (n->op->name == "matmul" && n->inputs.size() == 2 && v->type.rank() >= 2) {
      s.matmul = n;
      return s;
    }
    const Value* in = n->inputs.empty() ? nullptr : n->inputs[0];
    if (n->op->name == "reshape" && in->type.rank() >= 2 && last2(in->type.dims) == last2(v->type.dims)) {
      v = n->inputs[0];
    } else if (auto f = scalar_factor(n)) {
      v = f->first;
      s.scale *= f->second;
    } else {
      return std::nullopt;
    }
    if (!single_use(v, g)) return std::nullopt;
  }
}

Value* skip_bool_casts(Value* v) {
  while (Node* c = producer_of(v, "cast")) {
    const DType from = c->inputs[0]->type.dtype;
    if (from != DType::boolean && from != DType::u8) break;
    v = c->inputs[0];
  }
  return v;
}

bool is_neg_inf(const Value* v) {
  auto c = scalar_literal(v);
  return c && *c == -std::numeric_limits<double>::infinity();
}

// c == "every score in the row is -inf", as torch's _safe_softmax spells it:
// not(any(not(x == -inf), -1, keepdim)) (logical ops may go through u8 casts).
bool is_row_all_neg_inf(Value* c, const Value* x) {
  Node* outer = producer_of(skip_bool_casts(c), "logical_not");
  if (outer == nullptr) return false;
  Node* any = producer_of(skip_bool_casts(outer->inputs[0]), "amax");
  if (any == nullptr || !any->attrs.get_bool("keepdim")) return false;
  const auto& dims = any->attrs.get_ints("dims");
  const int64_t rank = static_cast<int64_t>(x->type.rank());
  if (dims.size() != 1 || normalize_axis(dims[0], rank) != rank - 1) return false;
  Value* finite = skip_bool_casts(any->inputs[0]);
  Node* cmp = nullptr;
  if (Node* neg = producer_of(finite, "logical_not")) {
    cmp = producer_of(skip_bool_casts(neg->inputs[0]), "eq");
  } else {
    cmp = producer_of(finite, "ne");
  }
  return cmp != nullptr && cmp->inputs[0] == x && is_neg_inf(cmp->inputs[1]);
}

// Follows single uses from `v` through batch-only reshapes and expands to the matmul reading it as its first input.
Node* consumer_matmul(Value* v, const Graph& g) {
  for (;;) {
    if (!single_use(v, g)) return nullptr;
    Node* n = v->users[0];
    if (n->op->name == "matmul") return n->inputs.size() == 2 && n->inputs[0] == v && n->inputs[1] != v ? n : nullptr;
    if ((n->op->name != "reshape" && n->op->name != "expand") || n->outputs[0]->type.rank() < 2 ||
        last2(n->outputs[0]->type.dims) != last2(v->type.dims))
      return nullptr;
    v = n->outputs[0];
  }
}

// The operand as the attention op reads it: [...batch, rows, cols] (permuted back when traced transposed).
Value* oriented(Graph& g, const Source& s, const Dims& batch, bool want_transposed, const Node* before) {
  Value* v = in_batch(g, s, batch, before);
  if (s.transposed == want_transposed) return v;
  std::vector<int64_t> perm(v->type.rank());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return g.add_node(get_op("permute"), {v}, permute_attrs(perm), "", before)->outputs[0];
}

bool fuse_at(Graph& g, Node* softmax) {
  Value* x = softmax->inputs[0];
  const int64_t rank = static_cast<int64_t>(x->type.rank());
  if (rank < 2 || normalize_axis(softmax->attrs.get_int("dim"), rank) != rank - 1) return false;
  Value* probs = softmax->outputs[0];
  if (g.is_graph_output(probs)) return false;

  // torch's safe softmax, or a plain one.
  bool safe = false;
  Node* guard = nullptr;
  if (probs->users.size() == 1 && probs->users[0]->op->name == "where") {
    Node* w = probs->users[0];
    if (w->inputs.size() == 3 && w->inputs[2] == probs && w->outputs[0]->type == probs->type &&
        all_equal_constant(w->inputs[1], 0.0) && is_row_all_neg_inf(w->inputs[0], x)) {
      safe = true;
      guard = w;
    }
  }
  Value* weights = safe ? guard->outputs[0] : probs;
  Node* mm2 = consumer_matmul(weights, g);
  if (mm2 == nullptr) return false;
  // The scores feed only the softmax (and, for the safe form, its guard's comparison).
  for (Node* u : x->users)
    if (u != softmax && !(safe && (u->op->name == "eq" || u->op->name == "ne"))) return false;
  if (g.is_graph_output(x)) return false;

  // x = scores [+ mask]
  Value* mask = nullptr;
  std::optional<Scores> scores = trace_scores(x, g);
  if (!scores) {
    Node* add = producer_of(x, "add");
    if (add == nullptr || add->inputs.size() != 2) return false;
    for (int i = 0; i < 2 && !scores; ++i) {
      Value* s = add->inputs[static_cast<size_t>(i)];
      Value* m = add->inputs[static_cast<size_t>(1 - i)];
      if (s->type != x->type || !single_use(s, g)) continue;
      scores = trace_scores(s, g);
      if (scores) mask = m;
    }
    if (!scores) return false;
  }
  if (mask != nullptr && !safe) return false;  // a plain softmax of a fully masked row is NaN, attention's is 0
  if (mask != nullptr && mask->type.dtype != x->type.dtype) return false;

  const Dims batch = batch_of(x->type.dims);
  const int64_t L = x->type.dims[static_cast<size_t>(rank - 2)], S = x->type.dims.back();
  Node* mm1 = scores->matmul;
  if (last2(mm1->outputs[0]->type.dims) != Dims{L, S}) return false;
  if (!single_use(mm1->outputs[0], g) && mm1->outputs[0] != x) return false;
  Source q = trace(mm1->inputs[0], batch);
  Source kt = trace(mm1->inputs[1], batch);
  Source v = trace(mm2->inputs[1], batch);
  auto readable = [&](const Source& s) { return fits_batch(s, batch) || regroupable(s, batch); };
  if (q.grouped || !readable(q) || !readable(kt) || !readable(v)) return false;
  const double scale = q.scale * kt.scale * scores->scale;
  if (scale == 0.0 || !std::isfinite(scale)) return false;
  const DType dt = x->type.dtype;
  if (q.value->type.dtype != dt || kt.value->type.dtype != dt || v.value->type.dtype != dt) return false;

  // Check the types first, so that a mismatch leaves the graph untouched.
  auto as_read = [&](const Source& s, bool want_transposed) {
    TensorType t = s.value->type;
    if (!fits_batch(s, batch)) t.dims = in_batch_dims(s, batch);
    if (s.transposed != want_transposed) std::swap(t.dims[t.rank() - 1], t.dims[t.rank() - 2]);
    return TensorType(t.dtype, t.dims);
  };
  std::vector<TensorType> types = {as_read(q, false), as_read(kt, true), as_read(v, false)};
  if (mask != nullptr) types.push_back(mask->type);
  Attrs attrs;
  attrs.set("causal", false);
  attrs.set("scale", scale);
  const TensorType& want = mm2->outputs[0]->type;
  try {
    const TensorType got = infer_types(get_op("attention"), types, complete_attrs(get_op("attention"), attrs),
                                       "fuse_attention")[0];
    if (got.dtype != want.dtype || got.numel() != want.numel() || got.dims.back() != want.dims.back()) return false;
  } catch (const Error&) {
    return false;
  }

  std::vector<Value*> ins = {oriented(g, q, batch, false, mm2), oriented(g, kt, batch, true, mm2),
                             oriented(g, v, batch, false, mm2)};
  if (mask != nullptr) ins.push_back(mask);
  Value* out = g.add_node(get_op("attention"), ins, attrs, "", mm2)->outputs[0];
  if (out->type.dims != want.dims) {
    Attrs r;
    r.set("shape", want.dims);
    out = g.add_node(get_op("reshape"), {out}, r, "", mm2)->outputs[0];
  }
  g.replace_all_uses(mm2->outputs[0], out);
  return true;
}

// contiguous(permute(attention(...), P)) with P placing the heads dim right before Ev: the attention
// writes [..., L, H, Ev] (heads_last) and P becomes a permute of that (none when P was the swap of H
// and L, the merge of heads before an output projection). A reshape that only puts leading 1s before
// the attention's dims (a batch of one dropped and restored) may come first.
bool write_heads_last(Graph& graph, Node* att) {
  Value* out = att->outputs[0];
  if (out->type.rank() < 3 || att->attrs.get_bool("heads_last") || !single_use(out, graph)) return false;
  Node* lift = nullptr;  // the reshape adding leading 1s, if any
  Node* permute = out->users[0];
  size_t ones = 0;
  if (permute->op->name == "reshape") {
    lift = permute;
    const Dims& to = lift->outputs[0]->type.dims;
    ones = to.size() - std::min(to.size(), out->type.rank());
    if (ones == 0 || !std::all_of(to.begin(), to.begin() + static_cast<std::ptrdiff_t>(ones),
                                  [](int64_t d) { return d == 1; }) ||
        !std::equal(to.begin() + static_cast<std::ptrdiff_t>(ones), to.end(), out->type.dims.begin()) ||
        !single_use(lift->outputs[0], graph))
      return false;
    permute = lift->outputs[0]->users[0];
  }
  const size_t rank = out->type.rank() + ones;
  if (permute->op->name != "permute" || !single_use(permute->outputs[0], graph)) return false;
  std::vector<int64_t> perm = permute->attrs.get_ints("dims");
  for (int64_t& p : perm)
    if (p < 0) p += static_cast<int64_t>(rank);
  const int64_t h = static_cast<int64_t>(rank) - 3, l = h + 1;
  if (perm[rank - 2] != h || perm[rank - 1] != static_cast<int64_t>(rank) - 1) return false;
  Node* copy = permute->outputs[0]->users[0];
  if (copy->op->name != "contiguous") return false;
  // P in the heads_last output's dims, where H and L trade places.
  std::vector<int64_t> moved(rank);
  bool is_identity = true;
  for (size_t d = 0; d < rank; ++d) {
    moved[d] = perm[d] == h ? l : perm[d] == l ? h : perm[d];
    is_identity &= moved[d] == static_cast<int64_t>(d);
  }
  Attrs attrs = att->attrs;
  attrs.set("heads_last", true);
  Node* fused = graph.add_node(*att->op, att->inputs, std::move(attrs), "", copy);
  const std::string node_name = att->name;
  Value* result = fused->outputs[0];
  if (lift != nullptr) {
    Dims lifted(ones, 1);
    lifted.insert(lifted.end(), result->type.dims.begin(), result->type.dims.end());
    result = graph.add_node(get_op("reshape"), {result}, reshape_attrs(lifted), "", copy)->outputs[0];
  }
  std::vector<Node*> dead = {att};  // erased after the node replaced, producers last
  if (lift != nullptr) dead.insert(dead.begin(), lift);
  if (is_identity) {
    dead.insert(dead.begin(), permute);
    replace_output(graph, copy, result, dead);
  } else {
    Value* view = graph.add_node(get_op("permute"), {result}, permute_attrs(moved), "", copy)->outputs[0];
    replace_output(graph, permute, view, dead);
  }
  fused->name = node_name;
  return true;
}

}  // namespace

bool fuse_attention(Graph& graph) {
  bool changed = false;
  for (Node* n : graph.nodes())
    if (n->op->name == "softmax" && !n->outputs[0]->users.empty()) changed |= fuse_at(graph, n);
  // Collected first: a rewrite erases the permute and copy after its attention, never another attention.
  for (Node* n : nodes_with_op(graph, "attention")) changed |= write_heads_last(graph, n);
  if (changed) dce(graph);  // the replaced matmul/softmax chains
  return changed;
}

}  // namespace kiln
