// The op table's entry type: everything kiln knows about one op, declared once
// (DESIGN.md section 5). Names, ATen map, verification and backend support
// tables are all derived from these declarations; nobody switches over ops.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/attr.h"
#include "ir/tensor_type.h"

namespace kiln {

enum OpTrait : uint32_t {
  kElementwise = 1u << 0,  // output[i] depends on inputs[i] (broadcast); declared in elementwise.def
  kReduction = 1u << 1,    // reduces axes of its first input
  kView = 1u << 2,         // output aliases input 0's storage with other dims/strides (no copy)
  kCommutative = 1u << 3,  // binary op with f(x, y) == f(y, x)
  kCreation = 1u << 4,     // no tensor inputs (full, arange)
  kFusedGroup = 1u << 5,   // holds a body graph (the "fused" op)
};

enum class ElementwiseKind : uint8_t { arith, floating, compare, logical, select };

struct ElementwiseInfo {
  int arity = 1;
  ElementwiseKind kind = ElementwiseKind::arith;
  std::string expression;  // C++ expression over x, y, z in compute type C
};

struct AttrSpec {
  std::string name;
  AttrKind kind;
  std::optional<AttrValue> default_value;  // nullopt: required
};

// Shape and dtype inference: input types and (defaults-filled) attrs to output
// types. Throws kiln::Error with a message; the caller adds the node's name.
using InferFn = std::function<std::vector<TensorType>(std::span<const TensorType> inputs, const Attrs& attrs)>;

struct OpDef {
  std::string name;
  std::vector<std::string> inputs;  // input names, in order
  bool variadic = false;            // takes any number >= 1 of inputs (concat); `inputs` names one
  int optional_inputs = 0;          // how many trailing `inputs` may be left out (conv2d's bias, sdpa's mask)
  int num_outputs = 1;
  std::vector<AttrSpec> attrs;
  uint32_t traits = 0;
  InferFn infer;
  std::vector<std::string> aten;  // ATen overloads it serves: "aten.add.Tensor", ...
  std::optional<ElementwiseInfo> elementwise;
  // Input x must be floating-point (f32, f16, bf16, f64): the op's inference
  // rejects other dtypes; docs/ops.md lists dtypes from it (elementwise ops: `kind`).
  bool floating_only = false;

  bool has(OpTrait t) const { return (traits & t) != 0; }
  const AttrSpec* attr_spec(std::string_view attr) const;
};

// The registry, filled once from the declarations in src/ops/*_ops.cpp.
const OpDef* find_op(std::string_view name);
const OpDef& get_op(std::string_view name);  // throws kiln::Error listing nothing but the name
const std::vector<const OpDef*>& all_ops();  // sorted by name
const OpDef* find_op_for_aten(std::string_view aten_overload);

// Checks attrs against the op's specs (unknown names, wrong kinds, missing
// required ones) and returns them with defaults filled in.
Attrs complete_attrs(const OpDef& op, const Attrs& given);

// Runs inference with arity and attribute checks; errors name `node_name`.
std::vector<TensorType> infer_types(const OpDef& op, std::span<const TensorType> inputs, const Attrs& attrs,
                                    std::string_view node_name);

}  // namespace kiln
