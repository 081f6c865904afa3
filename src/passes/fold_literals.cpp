// Constant folding over literals: a node whose inputs are all literals is run
// once at compile time with its CPU kernel and replaced by literals holding
// its results. Weights are never folded here: they live outside the IR and may
// change in place after compile (Note [Weights]); folds of weights are the
// runtime's business. Views of literals (which have no kernel, Note [Views are
// resolved by the runtime]) fold by reading through the view's layout into a
// contiguous literal. Results over FoldOptions::max_bytes stay as nodes.
#include <cstring>

#include "backends/cpu/cpu_kernel.h"
#include "backends/cpu/strided_loop.h"
#include "ops/op_def.h"
#include "ops/view_offset.h"
#include "passes/passes.h"
#include "support/error.h"

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

// A view of a literal: copy the elements it shows, in order, into contiguous bytes.
std::vector<std::vector<uint8_t>> fold_view(const Node& node) {
  const Value* in = node.inputs.at(0);
  const TensorType& out = node.outputs.at(0)->type;
  const size_t size = dtype_size(out.dtype);
  const int64_t offset = view_offset(node);
  std::vector<uint8_t> bytes(static_cast<size_t>(out.numel()) * size);
  const int64_t in_elements = static_cast<int64_t>(in->literal_data.size() / size);
  int64_t i = 0;
  bool in_range = true;
  cpu::for_each_offset<1>(out.dims, {&out.strides}, 0, out.numel(), [&](const std::array<int64_t, 1>& o) {
    int64_t src = offset + o[0];
    if (src < 0 || src >= in_elements) {
      in_range = false;
    } else {
      std::memcpy(bytes.data() + static_cast<size_t>(i) * size, in->literal_data.data() + src * size, size);
    }
    ++i;
  });
  KILN_CHECK(in_range, "node '", node.name, "' (", node.op->name, ") reads outside its literal input '%", in->name, "'");
  return {std::move(bytes)};
}

// Runs the node's CPU kernel on its literal inputs; nullopt when there is none.
std::optional<std::vector<std::vector<uint8_t>>> fold_with_kernel(const Node& node) {
  if (!cpu::cpu_supports(node, nullptr)) return std::nullopt;
  std::unique_ptr<cpu::CpuKernel> kernel = cpu::make_cpu_kernel(node);
  std::vector<TensorView> ins, outs;
  for (const Value* v : node.inputs) ins.emplace_back(const_cast<uint8_t*>(v->literal_data.data()), v->type);
  std::vector<std::vector<uint8_t>> results;
  for (const Value* v : node.outputs)
    results.emplace_back(static_cast<size_t>(v->type.numel()) * dtype_size(v->type.dtype));
  for (size_t i = 0; i < node.outputs.size(); ++i)
    outs.emplace_back(results[i].data(), TensorType(node.outputs[i]->type.dtype, node.outputs[i]->type.dims));
  std::vector<uint8_t> workspace(kernel->workspace_bytes());
  (void)workspace;  // kernels get scratch through the arena later; none needs it at fold time yet
  kernel->run(ins, outs, cpu::CpuContext{ThreadPool::global()});
  return results;
}

}  // namespace

bool fold_literals(Graph& graph, const FoldOptions& options) {
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (!all_literal_inputs(*node) || !worth_folding(*node, options)) continue;
    std::vector<std::vector<uint8_t>> results;
    if (node->op->has(kView)) {
      results = fold_view(*node);
    } else {
      auto folded = fold_with_kernel(*node);
      if (!folded) continue;
      results = std::move(*folded);
    }
    // New literals take over the results' names, so the IR reads the same.
    std::vector<std::pair<Value*, std::string>> renames;
    for (size_t i = 0; i < node->outputs.size(); ++i) {
      Value* out = node->outputs[i];
      Value* lit = graph.add_literal(graph.fresh_name("c"), TensorType(out->type.dtype, out->type.dims),
                                     std::move(results[i]));
      graph.replace_all_uses(out, lit);
      renames.emplace_back(lit, out->name);
    }
    graph.erase_node(node);
    for (auto& [lit, name] : renames) graph.rename(lit, name);
    changed = true;
  }
  return changed;
}

bool fold_literals(Graph& graph) { return fold_literals(graph, FoldOptions()); }

}  // namespace kiln
