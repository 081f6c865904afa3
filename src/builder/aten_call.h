// The ATen side of the frontend: one adapter per ATen overload turns a call
// (arguments by schema name, as the FX node gives them) into kiln ops through
// the GraphBuilder. Adapters are registered by family in aten_*.cpp; the
// Python importer only walks nodes and passes arguments by name.
#pragma once

#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "builder/graph_builder.h"

namespace kiln {

using AtenArg = std::variant<std::monostate, Value*, std::vector<Value*>, int64_t, double, bool,
                             std::vector<int64_t>, std::vector<double>, std::string, DType>;

class AtenCall {
 public:
  AtenCall(GraphBuilder& builder, std::string target, std::map<std::string, AtenArg, std::less<>> args)
      : b(builder), target_(std::move(target)), args_(std::move(args)) {}

  GraphBuilder& b;
  const std::string& target() const { return target_; }

  bool has(std::string_view name) const;  // present and not None
  Value* tensor(std::string_view name) const;
  Value* opt_tensor(std::string_view name) const;  // nullptr when absent/None
  std::vector<Value*> tensors(std::string_view name) const;      // no None element
  std::vector<Value*> opt_tensors(std::string_view name) const;  // None elements are nullptr (Tensor?[])
  Operand operand(std::string_view name) const;  // tensor or number
  int64_t int_(std::string_view name) const;
  int64_t int_or(std::string_view name, int64_t fallback) const;
  double number(std::string_view name) const;  // int or float
  double number_or(std::string_view name, double fallback) const;
  bool flag_or(std::string_view name, bool fallback) const;
  std::vector<int64_t> ints(std::string_view name) const;  // a single int becomes a 1-list
  std::vector<int64_t> ints_or(std::string_view name, std::vector<int64_t> fallback) const;
  std::optional<DType> dtype(std::string_view name) const;
  std::string string_or(std::string_view name, std::string fallback) const;

  // Throws kiln::Error(unsupported): the adapter cannot express this call.
  [[noreturn]] void unsupported(const std::string& why) const;

 private:
  const AtenArg* find(std::string_view name) const;
  std::string target_;
  std::map<std::string, AtenArg, std::less<>> args_;
};

// An adapter returns the kiln values for the ATen op's outputs, in order;
// nullptr for an output kiln does not produce (a later use of it falls back).
using AtenAdapter = std::function<std::vector<Value*>(AtenCall& call)>;

const AtenAdapter* find_aten_adapter(std::string_view target);
std::vector<std::string> aten_targets();  // sorted

namespace aten_internal {
// Small helpers the adapter files share.
inline std::vector<Value*> one(Value* v) { return {v}; }
inline Attrs attrs(std::initializer_list<std::pair<const char*, AttrValue>> items) {
  Attrs a;
  for (const auto& [k, v] : items) a.set(k, v);
  return a;
}

using AdapterMap = std::map<std::string, AtenAdapter, std::less<>>;
void register_elementwise_adapters(AdapterMap& map);
void register_shape_adapters(AdapterMap& map);
void register_nn_adapters(AdapterMap& map);
void register_reduction_adapters(AdapterMap& map);
void register_attention_adapters(AdapterMap& map);
}  // namespace aten_internal

}  // namespace kiln
