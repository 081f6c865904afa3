// Constant folding over literals: a node whose inputs are all literals is run
// once at compile time with its CPU kernel and replaced by literals holding
// its results. Weights are never folded here: they live outside the IR and may
// change in place after compile (Note [Weights]); folds of weights are the
// runtime's business. Views of literals (which have no kernel, Note [Views are
// resolved by the runtime]) fold by reading through the view's layout into a
// contiguous literal. Results over FoldOptions::max_bytes stay as nodes.
//
// A folded view's literal is contiguous where the view was not (a slice of a
// padded mask, say), so the views reading it are rebuilt on the literal and
// their strides follow (rewrite.h); a node whose readers cannot follow (an
// as_strided) is not folded.
#include "ops/op_def.h"
#include "passes/constant_eval.h"
#include "passes/passes.h"
#include "passes/rewrite.h"

namespace kiln {

namespace {

bool all_literal_inputs(const Node& node) {
  for (const Value* v : node.inputs)
    if (v->kind != ValueKind::literal) return false;
  return true;
}

bool worth_folding(const Node& node, const FoldOptions& options) {
  int64_t bytes = 0;
  for (const Value* out : node.outputs) {
    if (out->type.numel() < 0) return false;
    bytes += out->type.numel() * static_cast<int64_t>(dtype_size(out->type.dtype));
    if (node.op->has(kCreation) && out->type.numel() > kMaxFoldedCreationElements) return false;
  }
  return bytes <= options.max_bytes;
}

// One walk over the graph's nodes. It stops after a node whose readers were
// rebuilt on its literal (`rebuilt` set): the walk's node list holds the old
// views, erased, and not the new ones, which the next walk visits.
bool fold_walk(Graph& graph, const FoldOptions& options, bool* rebuilt) {
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (!all_literal_inputs(*node) || !worth_folding(*node, options)) continue;
    bool views_follow = true;
    for (const Value* out : node->outputs) {
      const TensorType packed(out->type.dtype, out->type.dims);
      if (packed.strides != out->type.strides && !views_can_follow(out, packed)) views_follow = false;
    }
    if (!views_follow) continue;
    std::vector<const Bytes*> inputs;
    for (const Value* v : node->inputs) inputs.push_back(&v->literal_data);
    auto folded = evaluate_node(*node, inputs);  // literals are contiguous, as views of them require
    if (!folded) continue;
    std::vector<Bytes> results = std::move(*folded);
    // New literals take over the results' names, so the IR reads the same.
    std::vector<std::pair<Value*, std::string>> renames;
    for (size_t i = 0; i < node->outputs.size(); ++i) {
      Value* out = node->outputs[i];
      Value* lit = graph.add_literal(graph.fresh_name("c"), TensorType(out->type.dtype, out->type.dims),
                                     std::move(results[i]));
      if (lit->type.strides == out->type.strides) {
        graph.replace_all_uses(out, lit);
      } else {
        replace_with_views_rebuilt(graph, out, lit);
        *rebuilt = true;
      }
      renames.emplace_back(lit, out->name);
    }
    graph.erase_node(node);
    for (auto& [lit, name] : renames) graph.rename(lit, name);
    changed = true;
    if (*rebuilt) break;
  }
  return changed;
}

}  // namespace

bool fold_literals(Graph& graph, const FoldOptions& options) {
  bool changed = false, rebuilt = true;
  while (rebuilt) {
    rebuilt = false;
    changed = fold_walk(graph, options, &rebuilt) || changed;
  }
  return changed;
}

bool fold_literals(Graph& graph) { return fold_literals(graph, FoldOptions()); }

}  // namespace kiln
