// Elementwise op declarations, generated from elementwise.def: names, arity,
// traits, dtype rules and broadcasting shape inference.
#include <vector>

#include "ops/broadcast.h"
#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::ops_internal {

namespace {

std::vector<TensorType> infer_elementwise(ElementwiseKind kind, std::span<const TensorType> in) {
  std::vector<Dims> dims;
  for (const TensorType& t : in) dims.push_back(t.dims);
  Dims out_dims = broadcast_dims(dims);
  // Operands that are combined must share one dtype: the graph builder inserts
  // casts (torch promotion) before building the node.
  size_t first = kind == ElementwiseKind::select ? 1 : 0;
  for (size_t i = first + 1; i < in.size(); ++i)
    KILN_CHECK(in[i].dtype == in[first].dtype || kind == ElementwiseKind::logical, "operand ", i, " is ",
               dtype_name(in[i].dtype), " but operand ", first, " is ", dtype_name(in[first].dtype),
               " (cast first)");
  DType out = in[first].dtype;
  switch (kind) {
    case ElementwiseKind::floating:
      KILN_CHECK(is_floating(out), "needs a floating-point input, got ", dtype_name(out));
      break;
    case ElementwiseKind::compare:
    case ElementwiseKind::logical: out = DType::boolean; break;
    case ElementwiseKind::select:
      KILN_CHECK(in[0].dtype == DType::boolean, "condition must be bool, got ", dtype_name(in[0].dtype));
      break;
    case ElementwiseKind::arith: break;
  }
  return {TensorType(out, out_dims)};
}

OpDef elementwise(const char* name, int arity, ElementwiseKind kind, const char* expression) {
  static const char* const kNames[] = {"x", "y", "z"};
  OpDef op;
  op.name = name;
  for (int i = 0; i < arity; ++i) op.inputs.push_back(kNames[i]);
  op.traits = kElementwise;
  std::string n = name;
  if (n == "add" || n == "mul" || n == "maximum" || n == "minimum" || n == "eq" || n == "ne" ||
      n == "logical_and" || n == "logical_or")
    op.traits |= kCommutative;
  op.elementwise = ElementwiseInfo{arity, kind, expression};
  op.infer = [kind](std::span<const TensorType> in, const Attrs&) { return infer_elementwise(kind, in); };
  return op;
}

}  // namespace

void register_elementwise_ops(OpList& ops) {
#define KILN_ELEMENTWISE(name, arity, kind, ...) \
  ops.push_back(elementwise(#name, arity, ElementwiseKind::kind, #__VA_ARGS__));
#include "ops/elementwise.def"
#undef KILN_ELEMENTWISE
}

}  // namespace kiln::ops_internal
