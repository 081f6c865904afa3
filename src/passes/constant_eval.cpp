// Compile-time evaluation of constant values (constant_eval.h).
#include "passes/constant_eval.h"

#include <cstring>
#include <map>

#include "backends/cpu/cpu_kernel.h"
#include "backends/cpu/strided_loop.h"
#include "ops/op_def.h"
#include "ops/view_offset.h"
#include "support/error.h"
#include "support/thread_pool.h"

namespace kiln {

namespace {

int64_t byte_size(const TensorType& t) { return t.numel() * static_cast<int64_t>(dtype_size(t.dtype)); }

// A view of a contiguous input: the elements it shows, in order.
Bytes evaluate_view(const Node& node, const Bytes& in) {
  const TensorType& out = node.outputs.at(0)->type;
  const size_t size = dtype_size(out.dtype);
  const int64_t offset = view_offset(node);
  Bytes bytes(static_cast<size_t>(out.numel()) * size);
  const int64_t in_elements = static_cast<int64_t>(in.size() / size);
  int64_t i = 0;
  bool in_range = true;
  cpu::for_each_offset<1>(out.dims, {&out.strides}, 0, out.numel(), [&](const std::array<int64_t, 1>& o) {
    int64_t src = offset + o[0];
    if (src < 0 || src >= in_elements) {
      in_range = false;
    } else {
      std::memcpy(bytes.data() + static_cast<size_t>(i) * size, in.data() + src * size, size);
    }
    ++i;
  });
  KILN_CHECK(in_range, "node '", node.name, "' (", node.op->name, ") reads outside its constant input '%",
             node.inputs.at(0)->name, "'");
  return bytes;
}

std::optional<std::vector<Bytes>> evaluate_with_kernel(const Node& node, const std::vector<const Bytes*>& inputs) {
  if (!cpu::cpu_supports(node, nullptr)) return std::nullopt;
  std::unique_ptr<cpu::CpuKernel> kernel = cpu::make_cpu_kernel(node);
  std::vector<TensorView> ins, outs;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const TensorType& t = node.inputs[i]->type;
    ins.emplace_back(const_cast<uint8_t*>(inputs[i]->data()), TensorType(t.dtype, t.dims));
  }
  std::vector<Bytes> results;
  for (const Value* v : node.outputs) results.emplace_back(static_cast<size_t>(byte_size(v->type)));
  for (size_t i = 0; i < node.outputs.size(); ++i)
    outs.emplace_back(results[i].data(), TensorType(node.outputs[i]->type.dtype, node.outputs[i]->type.dims));
  kernel->run(ins, outs, cpu::CpuContext{ThreadPool::global()});
  return results;
}

class ConstantEvaluator {
 public:
  explicit ConstantEvaluator(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // Null when `v` is not a constant this evaluator can compute.
  const Bytes* value(const Value* v, int depth = 0) {
    if (v->kind == ValueKind::literal) return &v->literal_data;
    auto known = known_.find(v);
    if (known != known_.end()) return &known->second;
    const Node* node = v->producer;
    if (node == nullptr || depth > kMaxDepth || v->type.numel() < 0 || byte_size(v->type) > max_bytes_) return nullptr;
    std::vector<const Bytes*> inputs;
    for (const Value* in : node->inputs) {
      const Bytes* b = value(in, depth + 1);
      if (b == nullptr) return nullptr;
      inputs.push_back(b);
    }
    if (node->op->has(kView) && !node->inputs.at(0)->type.is_contiguous()) return nullptr;
    for (const Value* out : node->outputs)
      if (byte_size(out->type) > max_bytes_) return nullptr;
    auto results = evaluate_node(*node, inputs);
    if (!results) return nullptr;
    const Bytes* mine = nullptr;
    for (size_t i = 0; i < node->outputs.size(); ++i) {
      Bytes& slot = known_[node->outputs[i]] = std::move((*results)[i]);
      if (node->outputs[i] == v) mine = &slot;
    }
    return mine;
  }

 private:
  static constexpr int kMaxDepth = 64;  // producers followed back from the value asked for
  int64_t max_bytes_;
  std::map<const Value*, Bytes> known_;
};

}  // namespace

std::optional<std::vector<Bytes>> evaluate_node(const Node& node, const std::vector<const Bytes*>& inputs) {
  if (node.op->has(kView)) return std::vector<Bytes>{evaluate_view(node, *inputs.at(0))};
  return evaluate_with_kernel(node, inputs);
}

std::optional<Bytes> evaluate_constant(const Value* value, int64_t max_bytes) {
  ConstantEvaluator evaluator(max_bytes);
  const Bytes* b = evaluator.value(value);
  if (b == nullptr) return std::nullopt;
  return *b;
}

}  // namespace kiln
