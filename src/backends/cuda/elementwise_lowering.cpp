// Lowering of elementwise ops and cast to the CUDA kernels of
// elementwise_kernels.cu (fused groups: fused_lowering.cpp). Which ops exist is read from
// elementwise.def through the op table (op.elementwise); nothing here names
// an individual op.
#include "backends/cuda/cuda_common.h"
#include "backends/cuda/fused_lowering.h"
#include "backends/cuda/kernel_registry.h"
#include "ops/op_def.h"
#include "support/error.h"

namespace kiln::cuda {

namespace {

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

}  // namespace

void register_elementwise_kernels(KernelMap& map) {
  for (const OpDef* op : all_ops())
    if (op->elementwise) map.emplace(op->name, &make_elementwise);
  map.emplace("cast", &make_cast);
  map.emplace("fused", &make_fused_kernel);  // fused_lowering.cpp
}

}  // namespace kiln::cuda
