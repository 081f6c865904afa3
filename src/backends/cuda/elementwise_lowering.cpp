// Lowering of elementwise ops, cast and fused groups to the CUDA kernels of
// elementwise_kernels.cu and fused_kernels.cu. Which ops exist is read from
// elementwise.def through the op table (op.elementwise); nothing here names
// an individual op.
#include <unordered_map>

#include "backends/cuda/cuda_common.h"
#include "backends/cuda/kernel_registry.h"
#include "ir/literal.h"
#include "ops/op_def.h"
#include "support/error.h"

namespace kiln::cuda {

namespace {

// An integer literal read exactly (int64 values beyond 2^53 do not survive double).
int64_t literal_int(const Value* lit) {
  const void* p = lit->literal_data.data();
  switch (lit->type.dtype) {
    case DType::i64: return *static_cast<const int64_t*>(p);
    case DType::i32: return *static_cast<const int32_t*>(p);
    case DType::i16: return *static_cast<const int16_t*>(p);
    case DType::i8: return *static_cast<const int8_t*>(p);
    case DType::u8: return *static_cast<const uint8_t*>(p);
    case DType::boolean: return *static_cast<const uint8_t*>(p) != 0;
    default: return static_cast<int64_t>(load_scalar(p, lit->type.dtype));
  }
}

class ElementwiseKernel final : public CudaKernel {
 public:
  ElementwiseKernel(const Node& node, int device, int op, Compute c, bool as_bool)
      : CudaKernel(node, device), op_(op), compute_(c), as_bool_(as_bool) {}

 protected:
  void launch(std::span<const TensorView> in, std::span<const TensorView> out, cudaStream_t s) const override {
    ElementwiseArgs a;
    a.space = index_space(out[0].dims);
    a.arity = static_cast<int>(in.size());
    a.as_bool = as_bool_;
    for (size_t k = 0; k < in.size(); ++k) a.in[k] = operand_over(in[k], out[0].dims);
    a.out = out[0].data;
    a.out_dtype = static_cast<int>(out[0].dtype);
    check_launch(launch_elementwise(op_, compute_, a, s));
  }

 private:
  int op_;
  Compute compute_;
  bool as_bool_;
};

std::unique_ptr<BackendKernel> make_elementwise(const Node& node, const LowerContext& ctx, std::string* reason) {
  const OpDef& op = *node.op;
  if (!fits_rank(node, reason)) return nullptr;
  if (!op.elementwise || node.inputs.size() != static_cast<size_t>(op.elementwise->arity) || node.inputs.size() > 3) {
    *reason = "not an elementwise node with its arity of inputs";
    return nullptr;
  }
  const int index = elementwise_op_index(op.name.c_str());
  ElementwiseKind kind = op.elementwise->kind;
  DType value = kind == ElementwiseKind::logical  ? DType::i64
                : kind == ElementwiseKind::select ? node.inputs[1]->type.dtype
                                                  : node.inputs[0]->type.dtype;
  Compute c = compute_of(value);
  if (index < 0 || !elementwise_has_form(index, c)) {
    *reason = str_cat("no CUDA form of '", op.name, "' for dtype ", dtype_name(value));
    return nullptr;
  }
  return std::make_unique<ElementwiseKernel>(node, ctx.device, index, c, kind == ElementwiseKind::logical);
}

std::unique_ptr<BackendKernel> make_cast(const Node& node, const LowerContext& ctx, std::string* reason) {
  if (!fits_rank(node, reason)) return nullptr;
  if (node.inputs.size() != 1 || node.outputs.size() != 1) {
    *reason = "cast takes one input and one output";
    return nullptr;
  }
  return std::make_unique<ElementwiseKernel>(node, ctx.device, kCastOp, compute_of(node.inputs[0]->type.dtype), false);
}

// ---- fused groups -------------------------------------------------------------

class FusedKernel final : public CudaKernel {
 public:
  FusedKernel(const Node& node, int device, Compute c, FusedArgs program)
      : CudaKernel(node, device), compute_(c), program_(program) {}

 protected:
  void launch(std::span<const TensorView> in, std::span<const TensorView> out, cudaStream_t s) const override {
    FusedArgs a = program_;
    a.space = index_space(out[0].dims);
    for (size_t k = 0; k < in.size(); ++k) a.in[k] = operand_over(in[k], out[0].dims);
    for (size_t k = 0; k < out.size(); ++k) a.out[k] = out[k].data;
    check_launch(launch_fused(compute_, a, s));
  }

 private:
  Compute compute_;
  FusedArgs program_;  // steps, literals and output slots; pointers set per call
};

std::unique_ptr<BackendKernel> make_fused(const Node& node, const LowerContext& ctx, std::string* reason) {
  if (!fits_rank(node, reason)) return nullptr;
  if (node.body == nullptr || node.outputs.empty() || node.body->inputs().size() != node.inputs.size() ||
      node.body->outputs().size() != node.outputs.size()) {
    *reason = "fused node's inputs or outputs do not match its body";
    return nullptr;
  }
  const Graph& body = *node.body;
  const Dims& dims = node.outputs[0]->type.dims;
  if (node.inputs.size() > kMaxFusedInputs || body.literals().size() > kMaxFusedLiterals ||
      body.nodes().size() > kMaxFusedOps || node.outputs.size() > kMaxFusedOutputs) {
    *reason = str_cat("fused group too large for the CUDA kernel (", node.inputs.size(), " inputs, ",
                      body.literals().size(), " literals, ", body.nodes().size(), " ops, ", node.outputs.size(),
                      " outputs; at most ", kMaxFusedInputs, ", ", kMaxFusedLiterals, ", ", kMaxFusedOps, ", ",
                      kMaxFusedOutputs, ")");
    return nullptr;
  }
  // The compute type: double with an f64 value, float with a floating one,
  // else int64; mixing integer and floating dtypes is not supported (the CPU
  // kernel's rule).
  bool f64 = false, floating = false, integer = false;
  auto note = [&](DType d) {
    f64 = f64 || d == DType::f64;
    floating = floating || is_floating(d);
    integer = integer || is_integral(d);
  };
  for (const Value* v : body.inputs()) note(v->type.dtype);
  for (const Value* v : body.literals()) note(v->type.dtype);
  for (const Node* n : body.nodes()) note(n->outputs.at(0)->type.dtype);
  if (floating && integer) {
    *reason = "fused body mixes integer and floating dtypes";
    return nullptr;
  }
  const Compute c = f64 ? Compute::f64 : floating ? Compute::f32 : Compute::i64;

  FusedArgs p;
  std::unordered_map<const Value*, int> slot;
  int next = 0;
  for (const Value* v : body.inputs()) {
    p.in[next].dtype = static_cast<int>(v->type.dtype);
    slot[v] = next++;
  }
  p.num_inputs = next;
  for (const Value* lit : body.literals()) {
    if (lit->type.numel() != 1) {
      *reason = str_cat("fused body literal %", lit->name, " is not a scalar");
      return nullptr;
    }
    const int k = next - p.num_inputs;
    double v = load_scalar(lit->literal_data.data(), lit->type.dtype);
    p.literal_f[k] = v;
    p.literal_i[k] = literal_int(lit);
    slot[lit] = next++;
  }
  p.num_literals = next - p.num_inputs;
  for (const Node* n : body.nodes()) {
    FusedStep st;
    if (n->outputs.size() != 1 || n->outputs[0]->type.dims != dims) {
      *reason = str_cat("body node '", n->name, "' does not produce the group's dims [", dims_to_string(dims), "]");
      return nullptr;
    }
    if (n->op->name == "cast") {
      st.op = kCastOp;
    } else {
      int index = n->op->elementwise ? elementwise_op_index(n->op->name.c_str()) : -1;
      if (index < 0 || n->inputs.size() != static_cast<size_t>(n->op->elementwise->arity) ||
          !elementwise_has_form(index, c)) {
        *reason = str_cat("body node '", n->name, "' (", n->op->name, ") is not an elementwise op this kernel can run");
        return nullptr;
      }
      st.op = static_cast<int16_t>(index);
    }
    for (size_t k = 0; k < n->inputs.size() && k < 3; ++k) {
      auto it = slot.find(n->inputs[k]);
      if (it == slot.end()) {
        *reason = str_cat("body node '", n->name, "' reads a value defined outside the body");
        return nullptr;
      }
      st.in[k] = static_cast<uint8_t>(it->second);
    }
    st.out = static_cast<uint8_t>(next);
    st.dtype = static_cast<uint8_t>(n->outputs[0]->type.dtype);
    slot[n->outputs[0]] = next++;
    p.steps[p.num_steps++] = st;
  }
  for (size_t k = 0; k < body.outputs().size(); ++k) {
    p.out_slot[k] = static_cast<uint8_t>(slot.at(body.outputs()[k]));
    p.out_dtype[k] = static_cast<int>(node.outputs[k]->type.dtype);
  }
  p.num_outputs = static_cast<int>(body.outputs().size());
  return std::make_unique<FusedKernel>(node, ctx.device, c, p);
}

}  // namespace

void register_elementwise_kernels(KernelMap& map) {
  for (const OpDef* op : all_ops())
    if (op->elementwise) map.emplace(op->name, &make_elementwise);
  map.emplace("cast", &make_cast);
  map.emplace("fused", &make_fused);
}

}  // namespace kiln::cuda
