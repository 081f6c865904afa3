// The CPU kernel for fused elementwise groups (op "fused", Note [Fused groups]
// in src/ops/fused_ops.cpp): one pass over memory for the whole group. The
// output index space is cut into chunks of kElementwiseChunk elements, spread
// over the thread pool; per chunk, each body input is gathered (broadcast and
// strided reads) into a compute-type buffer, the body's ops run in order on
// those buffers through the shared elementwise evaluator (elementwise_eval.h),
// and the body outputs are stored. The compute type is double when the body
// has an f64 value, else float when it has a floating value, else int64_t;
// bodies mixing integer and floating dtypes are not supported (the fusion
// pass never makes them). Every intermediate is rounded to its own dtype
// (f16, bf16, narrower ints, bool), so results equal the ops run one by one.
#include <cstring>
#include <type_traits>
#include <unordered_map>

#include "backends/cpu/dtype_dispatch.h"
#include "backends/cpu/elementwise_eval.h"
#include "backends/cpu/elementwise_loop.h"
#include "backends/cpu/kernel_registry.h"
#include "ir/literal.h"
#include "ops/broadcast.h"
#include "ops/fused_compute.h"
#include "ops/op_def.h"

namespace kiln::cpu::internal {

namespace {

// Converts every value of buf to dtype `d` and back, as storing and
// reloading would.
template <typename C>
void round_to(DType d, C* buf, int64_t n) {
  dispatch_dtype(d, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, C>)
      for (int64_t i = 0; i < n; ++i) buf[i] = static_cast<C>(to_compute<T>(from_compute<T, C>(buf[i])));
  });
}

template <typename C>
class FusedKernel final : public CpuKernel {
 public:
  struct Op {
    ElementwiseFn<C> fn = nullptr;  // nullptr: a cast
    std::vector<int> in;            // slots
    int out = 0;
    DType dtype = DType::f32;       // the result's dtype (rounding, cast target)
  };

  // Slots 0..num_inputs-1: body inputs; then literals; then op results.
  FusedKernel(const Graph& body, std::vector<Op> ops, std::vector<int> out_slots)
      : ops_(std::move(ops)), out_slots_(std::move(out_slots)) {
    num_inputs_ = body.inputs().size();
    for (const Value* lit : body.literals()) literals_.push_back({lit->type, lit->literal_data});
    num_slots_ = num_inputs_ + literals_.size() + ops_.size();
  }

  void run(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
           const CpuContext& ctx) const override {
    const Dims& dims = outputs[0].dims;
    const int64_t total = numel(dims);
    std::vector<TensorView> literal_views;
    for (const auto& [type, bytes] : literals_) literal_views.emplace_back(const_cast<uint8_t*>(bytes.data()), type);
    std::vector<LoopOperand> operands;
    operands.reserve(num_inputs_ + literals_.size());
    for (size_t k = 0; k < num_inputs_ + literals_.size(); ++k)
      operands.push_back(loop_operand(k < num_inputs_ ? inputs[k] : literal_views[k - num_inputs_], dims));
    parallel_range(ctx.pool, total, [&](int64_t begin, int64_t end) {
      std::vector<C> storage(num_slots_ * static_cast<size_t>(kElementwiseChunk));
      std::vector<const C*> ptr(num_slots_);
      std::vector<const C*> args;
      for (int64_t b = begin; b < end; b += kElementwiseChunk) {
        const int64_t n = std::min(kElementwiseChunk, end - b);
        for (size_t k = 0; k < operands.size(); ++k)
          ptr[k] = load_chunk<C>(operands[k], b, n, slot(storage, k));
        for (const Op& op : ops_) {
          C* out = slot(storage, static_cast<size_t>(op.out));
          if (op.fn != nullptr) {
            args.clear();
            for (int s : op.in) args.push_back(ptr[static_cast<size_t>(s)]);
            op.fn(args.data(), out, n);
          } else if (out != ptr[static_cast<size_t>(op.in[0])]) {
            std::memcpy(out, ptr[static_cast<size_t>(op.in[0])], static_cast<size_t>(n) * sizeof(C));
          }
          round_to<C>(op.dtype, out, n);
          ptr[static_cast<size_t>(op.out)] = out;
        }
        for (size_t k = 0; k < out_slots_.size(); ++k)
          store_chunk<C>(outputs[k], b, n, ptr[static_cast<size_t>(out_slots_[k])]);
      }
    });
  }

 private:
  static C* slot(std::vector<C>& storage, size_t k) { return storage.data() + k * static_cast<size_t>(kElementwiseChunk); }

  std::vector<Op> ops_;
  std::vector<int> out_slots_;
  std::vector<std::pair<TensorType, std::vector<uint8_t>>> literals_;  // copies: the kernel may outlive the graph
  size_t num_inputs_ = 0, num_slots_ = 0;
};

template <typename C>
std::unique_ptr<CpuKernel> build(const Node& node, std::string* reason) {
  const Graph& body = *node.body;
  std::unordered_map<const Value*, int> slot;
  int next = 0;
  for (const Value* v : body.inputs()) slot[v] = next++;
  for (const Value* v : body.literals()) slot[v] = next++;
  const Dims& dims = node.outputs[0]->type.dims;
  std::vector<typename FusedKernel<C>::Op> ops;
  for (const Node* n : body.nodes()) {
    typename FusedKernel<C>::Op op;
    if (n->outputs.size() != 1 || n->outputs[0]->type.dims != dims) {
      *reason = str_cat("body node '", n->name, "' does not produce the group's dims ", dims_to_string(dims));
      return nullptr;
    }
    if (n->op->name == "cast") {
      if (n->inputs.size() != 1) {
        *reason = str_cat("body node '", n->name, "': cast takes one input");
        return nullptr;
      }
    } else {
      op.fn = elementwise_fn<C>(*n->op);
      if (op.fn == nullptr || !n->op->elementwise || n->inputs.size() != static_cast<size_t>(n->op->elementwise->arity)) {
        *reason = str_cat("body node '", n->name, "' (", n->op->name, ") is not an elementwise op this kernel can run");
        return nullptr;
      }
    }
    for (const Value* v : n->inputs) {
      auto it = slot.find(v);
      if (it == slot.end()) {
        *reason = str_cat("body node '", n->name, "' reads a value defined outside the body");
        return nullptr;
      }
      op.in.push_back(it->second);
    }
    op.out = next;
    op.dtype = n->outputs[0]->type.dtype;
    slot[n->outputs[0]] = next++;
    ops.push_back(std::move(op));
  }
  std::vector<int> outs;
  for (const Value* v : body.outputs()) outs.push_back(slot.at(v));
  return std::make_unique<FusedKernel<C>>(body, std::move(ops), std::move(outs));
}

std::unique_ptr<CpuKernel> make_fused(const Node& node, std::string* reason) {
  const auto compute = fused_compute_type(node, reason);
  if (!compute) return nullptr;
  if (*compute == FusedCompute::f64) return build<double>(node, reason);
  if (*compute == FusedCompute::f32) return build<float>(node, reason);
  return build<int64_t>(node, reason);
}

}  // namespace

void register_fused_kernels(KernelMap& map) { map.emplace("fused", &make_fused); }

}  // namespace kiln::cpu::internal
