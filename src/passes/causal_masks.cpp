// causal_masks: an attention whose mask is a constant spelling the causal
// pattern becomes attention {causal=true} with no mask; one whose constant
// mask masks nothing (additive: every element 0; bool: every element true)
// loses its mask. BERT-style models build an all-zero padding mask when
// called without an attention mask.
//
// Models build their causal masks from arange and comparisons (GPT-2, LLaMA
// and the like in transformers), so the mask is a constant of the graph's
// shapes: an [.., L, S] tensor, bool (true = attend) or additive (0 where a
// query attends, the dtype's lowest value or -inf where not). The attention
// kernels run that as a mask read per score, on every tile; causal=true
// (top-left aligned: query i sees keys j <= i) needs no mask reads and skips
// the tiles above the diagonal.
//
// The mask is evaluated here on the CPU (constant_eval.h) and replaced only
// when every element matches the pattern exactly, in every leading slice. An
// additive mask's masked elements must be at most -65504 (f16's lowest finite
// value; transformers writes it in f16 and, in some versions, in bf16 too,
// where it rounds to -65536; finfo(bf16/f32).min and -inf qualify as well).
// Such a key's term is exactly 0, as for a skipped key, unless its scaled
// score is more than about 65400 above its row's largest unmasked one (the
// diagonal is always unmasked): exp() of anything below -104 is 0 in f32.
// Real models' scores are orders of magnitude inside that. A weaker mask
// (BERT-style -10000) is kept.
#include <cmath>
#include <map>
#include <tuple>

#include "ir/literal.h"
#include "ops/op_def.h"
#include "passes/constant_eval.h"
#include "passes/passes.h"
#include "passes/rewrite.h"

namespace kiln {

namespace {

constexpr int64_t kMaxMaskBytes = int64_t{64} << 20;  // evaluated on the CPU at compile time

// An additive mask element at or below this masks its key (see the note above), in every float dtype.
constexpr double kMaskedAtMost = -65504.0;

// What a constant mask does.
enum class MaskKind { other, causal, nothing_masked };

// Whether `mask` (contiguous bytes) masks no score: every element 0 (additive) or true (bool).
bool masks_nothing(const Bytes& mask, const TensorType& type) {
  const size_t size = dtype_size(type.dtype);
  const bool boolean = type.dtype == DType::boolean;
  for (int64_t e = 0; e < type.numel(); ++e) {
    const double v = load_scalar(mask.data() + static_cast<size_t>(e) * size, type.dtype);
    if (boolean ? v == 0 : v != 0) return false;
  }
  return true;
}

// Whether `mask` (contiguous [.., L, S] bytes) holds the top-left causal pattern in every slice.
bool is_causal_pattern(const Bytes& mask, const TensorType& type, int64_t L, int64_t S) {
  const size_t size = dtype_size(type.dtype);
  const int64_t slices = type.numel() / (L * S);
  const bool boolean = type.dtype == DType::boolean;
    for (int64_t s = 0; s < slices; ++s)
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < S; ++j) {
        const double v = load_scalar(mask.data() + static_cast<size_t>((s * L + i) * S + j) * size, type.dtype);
        const bool attends = j <= i;
        if (boolean ? (v != 0) != attends : attends ? v != 0 : !(v <= kMaskedAtMost)) return false;
      }
  return true;
}

// What the constant `mask` does to an attention of L queries and S keys (other: not a constant, or
// any other pattern).
MaskKind mask_kind(const Value* mask, int64_t L, int64_t S) {
  const TensorType& m = mask->type;
  if (m.dtype != DType::boolean && !is_floating(m.dtype)) return MaskKind::other;
  std::optional<Bytes> values = evaluate_constant(mask, kMaxMaskBytes);
  if (!values) return MaskKind::other;
  if (masks_nothing(*values, m)) return MaskKind::nothing_masked;  // any broadcast shape
  const bool full_scores = m.rank() >= 2 && m.dims[m.rank() - 2] == L && m.dims[m.rank() - 1] == S;
  return full_scores && is_causal_pattern(*values, m, L, S) ? MaskKind::causal : MaskKind::other;
}

// Layers share one mask value: each (mask, L, S) is evaluated once per run of the pass.
using Verdicts = std::map<std::tuple<const Value*, int64_t, int64_t>, MaskKind>;

bool drop_constant_mask(Graph& graph, Node* att, Verdicts& verdicts) {
  if (att->inputs.size() != 4 || att->attrs.get_bool("causal")) return false;
  const TensorType& q = att->inputs[0]->type;
  const TensorType& k = att->inputs[1]->type;
  if (q.rank() < 2 || k.rank() < 2) return false;
  const int64_t L = q.dims[q.rank() - 2], S = k.dims[k.rank() - 2];
  if (L <= 0 || S <= 0) return false;
  const auto key = std::make_tuple(static_cast<const Value*>(att->inputs[3]), L, S);
  auto known = verdicts.find(key);
  if (known == verdicts.end()) known = verdicts.emplace(key, mask_kind(att->inputs[3], L, S)).first;
  if (known->second == MaskKind::other) return false;
  Attrs attrs = att->attrs;
  attrs.set("causal", known->second == MaskKind::causal);
  Node* unmasked = graph.add_node(*att->op, {att->inputs[0], att->inputs[1], att->inputs[2]}, std::move(attrs), "", att);
  const std::string name = att->name;
  replace_output(graph, att, unmasked->outputs[0]);
  unmasked->name = name;
  return true;
}

}  // namespace

bool causal_masks(Graph& graph) {
  bool changed = false;
  Verdicts verdicts;
  for (Node* n : nodes_with_op(graph, "attention")) changed |= drop_constant_mask(graph, n, verdicts);
  if (changed) dce(graph);  // the masks' chains
  return changed;
}

}  // namespace kiln
