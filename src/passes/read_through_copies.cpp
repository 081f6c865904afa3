// read_through_copies: a contiguous copy that attention (or another copy)
// reads only through views becomes one strided view (as_strided) of the
// copy's source per reader, and the copy goes.
//
// torchvision's multi-head attention projects q, k and v in one product,
// re-lays the result out as [3, L, B, E] with a contiguous copy, and takes q,
// k and v as views of that copy ([B, H, L, D] after a select, a reshape that
// merges B and H, a transpose and a reshape that splits them again). The
// attention kernels read any strides with a unit stride along the head dim,
// so they can read the product directly; no chain of the standard views can
// express that (the merge of B and H is not a view of the product), but one
// as_strided can.
//
// The mapping: each attention input is a view of the copy with dims, strides
// (in the copy's contiguous element space) and an offset. Written as digits
// of the copy's dims (mixed radix), a view dim's stride moves a fixed amount
// along each of the copy's dims; when no digit can overflow over the view's
// whole range, every element's position in the copy is affine in the view's
// indices, and so is its position in the source: strides are the digits
// weighted by the source's strides (copy dims that the source steps over as
// one, such as heads and head dim, are merged first). Anything else is left
// as it is.
//
// A copy read through views by another copy is the same case: torch's math
// attention leaves its result as contiguous(permute(., [L, B, H, Ev])) and
// a model then permutes and copies it again (BERT's merge of heads); the
// second copy reads the source directly, and when that is already in order
// simplify removes it too.
#include <optional>
#include <vector>

#include "ops/op_def.h"
#include "ops/view_offset.h"
#include "passes/passes.h"
#include "passes/rewrite.h"

namespace kiln {

namespace {

struct Layout {
  Dims dims, strides;
  int64_t offset = 0;
};

// `v`'s layout over the copy `root` (its output), when v is root or a chain of views of it.
std::optional<Layout> layout_over(const Value* v, const Value* root) {
  int64_t offset = 0;
  const Value* at = v;
  while (at != root) {
    const Node* p = at->producer;
    if (p == nullptr || !p->op->has(kView)) return std::nullopt;
    offset += view_offset(*p);
    at = p->inputs[0];
  }
  return Layout{v->type.dims, v->type.strides, offset};
}

// The copy's dims with neighbours merged where the source steps over them as one (its stride on a dim
// is the next dim's stride times the next dim's size): a view that walks across such a pair (the heads
// and head dim merged back into one) then stays within one dim. Sizes, the copy's (contiguous) strides,
// and the source's strides.
struct Merged {
  Dims dims, copy_strides, source_strides;
};

Merged merge_dims(const TensorType& copy, const TensorType& source) {
  Merged m;
  for (size_t k = 0; k < copy.rank(); ++k) {
    if (!m.dims.empty() && m.source_strides.back() == source.strides[k] * copy.dims[k]) {
      m.dims.back() *= copy.dims[k];
      m.copy_strides.back() = copy.strides[k];
      m.source_strides.back() = source.strides[k];
      continue;
    }
    m.dims.push_back(copy.dims[k]);
    m.copy_strides.push_back(copy.strides[k]);
    m.source_strides.push_back(source.strides[k]);
  }
  return m;
}

// The same elements as a layout over the copy's source, or nullopt when they are not one strided view of it.
std::optional<Layout> over_source(const Layout& view, const TensorType& copy, const TensorType& source) {
  const Merged c = merge_dims(copy, source);
  const size_t rank = c.dims.size();
  auto digits = [&](int64_t linear, std::vector<int64_t>* out) {
    out->assign(rank, 0);
    for (size_t k = 0; k < rank; ++k) {
      if (c.dims[k] == 0) return false;
      (*out)[k] = (linear / c.copy_strides[k]) % c.dims[k];
    }
    int64_t back = 0;
    for (size_t k = 0; k < rank; ++k) back += (*out)[k] * c.copy_strides[k];
    return back == linear;
  };
  std::vector<int64_t> base, reach;
  if (!digits(view.offset, &base)) return std::nullopt;
  reach = base;  // the largest digit any element of the view reaches, per copy dim
  Layout out{view.dims, Dims(view.dims.size(), 0), 0};
  for (size_t m = 0; m < view.dims.size(); ++m) {
    if (view.dims[m] == 0) return std::nullopt;
    if (view.dims[m] == 1) continue;
    std::vector<int64_t> step;
    if (!digits(view.strides[m], &step)) return std::nullopt;
    for (size_t k = 0; k < rank; ++k) {
      reach[k] += step[k] * (view.dims[m] - 1);
      out.strides[m] += step[k] * c.source_strides[k];
    }
  }
  for (size_t k = 0; k < rank; ++k) {
    if (reach[k] >= c.dims[k]) return std::nullopt;  // a carry: not affine
    out.offset += base[k] * c.source_strides[k];
  }
  return out;
}

// The reads of `copy`'s output through views that can take a strided view of its source instead:
// attention's q, k and v, and other copies (input 0); nullopt when anything else reads it.
std::optional<std::vector<std::pair<Node*, size_t>>> strided_reads(const Value* out, const Graph& graph) {
  if (graph.is_graph_output(out)) return std::nullopt;
  std::vector<std::pair<Node*, size_t>> reads;
  for (Node* user : distinct_users(out)) {
    if (user->op->has(kView)) {
      auto more = strided_reads(user->outputs[0], graph);
      if (!more) return std::nullopt;
      reads.insert(reads.end(), more->begin(), more->end());
      continue;
    }
    if (user->op->name == "contiguous") {
      reads.emplace_back(user, 0);
      continue;
    }
    if (user->op->name != "attention") return std::nullopt;
    for (size_t i = 0; i < user->inputs.size(); ++i) {
      if (user->inputs[i] != out) continue;
      if (i > 2) return std::nullopt;  // the mask
      reads.emplace_back(user, i);
    }
  }
  return reads;
}

bool view_source(Graph& graph, Node* copy) {
  Value* source = copy->inputs[0];
  const Value* out = copy->outputs[0];
  if (source->type.numel() <= 0) return false;
  auto reads = strided_reads(out, graph);
  if (!reads || reads->empty()) return false;
  std::vector<Layout> layouts;
  for (auto [att, i] : *reads) {
    auto view = layout_over(att->inputs[i], out);
    if (!view) return false;
    auto mapped = over_source(*view, out->type, source->type);
    const bool attention = att->op->name == "attention";
    if (!mapped || (attention && mapped->dims.back() > 1 && mapped->strides.back() != 1)) return false;  // unit head dim
    layouts.push_back(std::move(*mapped));
  }
  for (size_t r = 0; r < reads->size(); ++r) {
    auto [att, i] = (*reads)[r];
    Attrs a;
    a.set("shape", layouts[r].dims);
    a.set("strides", layouts[r].strides);
    a.set("offset", layouts[r].offset);
    Value* view = graph.add_node(get_op("as_strided"), {source}, a, "", att)->outputs[0];
    graph.set_node_input(att, i, view);
  }
  return true;
}

}  // namespace

bool read_through_copies(Graph& graph) {
  bool changed = false;
  for (Node* c : nodes_with_op(graph, "contiguous")) changed |= view_source(graph, c);
  if (changed) dce(graph);  // the copies and their views
  return changed;
}

}  // namespace kiln
