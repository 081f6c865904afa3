// attention_input_views: a contiguous copy that attention reads only through
// views becomes one strided view (as_strided) of the copy's source per
// attention input, and the copy goes.
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
// weighted by the source's strides. Anything else is left as it is.
#include <algorithm>
#include <optional>
#include <vector>

#include "ops/op_def.h"
#include "ops/view_offset.h"
#include "passes/passes.h"

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

// The same elements as a layout over the copy's source, or nullopt when they are not one strided view of it.
std::optional<Layout> over_source(const Layout& view, const TensorType& copy, const TensorType& source) {
  const size_t rank = copy.rank();
  const Dims& cs = copy.strides;  // contiguous
  auto digits = [&](int64_t linear, std::vector<int64_t>* out) {
    out->assign(rank, 0);
    for (size_t k = 0; k < rank; ++k) {
      if (copy.dims[k] == 0) return false;
      (*out)[k] = (linear / cs[k]) % copy.dims[k];
    }
    int64_t back = 0;
    for (size_t k = 0; k < rank; ++k) back += (*out)[k] * cs[k];
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
      out.strides[m] += step[k] * source.strides[k];
    }
  }
  for (size_t k = 0; k < rank; ++k) {
    if (reach[k] >= copy.dims[k]) return std::nullopt;  // a carry: not affine
    out.offset += base[k] * source.strides[k];
  }
  return out;
}

// The attention inputs (q, k, v) reading `copy`'s output through views, or nullopt when anything else reads it.
std::optional<std::vector<std::pair<Node*, size_t>>> attention_reads(const Value* out, const Graph& graph) {
  if (graph.is_graph_output(out)) return std::nullopt;
  std::vector<std::pair<Node*, size_t>> reads;
  std::vector<Node*> users;  // out->users has one entry per use: each user once, in order
  for (Node* u : out->users)
    if (std::find(users.begin(), users.end(), u) == users.end()) users.push_back(u);
  for (Node* user : users) {
    if (user->op->has(kView)) {
      auto more = attention_reads(user->outputs[0], graph);
      if (!more) return std::nullopt;
      reads.insert(reads.end(), more->begin(), more->end());
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
  auto reads = attention_reads(out, graph);
  if (!reads || reads->empty()) return false;
  std::vector<Layout> layouts;
  for (auto [att, i] : *reads) {
    auto view = layout_over(att->inputs[i], out);
    if (!view) return false;
    auto mapped = over_source(*view, out->type, source->type);
    if (!mapped || (mapped->dims.back() > 1 && mapped->strides.back() != 1)) return false;  // unit head-dim stride
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

bool attention_input_views(Graph& graph) {
  std::vector<Node*> copies;
  for (Node* n : graph.nodes())
    if (n->op->name == "contiguous") copies.push_back(n);
  bool changed = false;
  for (Node* c : copies) changed |= view_source(graph, c);
  if (changed) dce(graph);  // the copies and their views
  return changed;
}

}  // namespace kiln
