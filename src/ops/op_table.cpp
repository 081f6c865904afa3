// The op registry: collects every family's declarations once, and checks
// attributes and arity before running an op's inference.
#include <algorithm>
#include <map>

#include "ops/op_def.h"
#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln {

namespace {

struct Table {
  ops_internal::OpList ops;
  std::vector<const OpDef*> sorted;
  std::map<std::string, const OpDef*, std::less<>> by_name;
  std::map<std::string, const OpDef*, std::less<>> by_aten;

  Table() {
    using namespace ops_internal;
    register_elementwise_ops(ops);
    register_cast_ops(ops);
    register_reduction_ops(ops);
    register_linalg_ops(ops);
    register_norm_ops(ops);
    register_pool_ops(ops);
    register_shape_ops(ops);
    register_index_ops(ops);
    register_creation_ops(ops);
    register_attention_ops(ops);
    register_fused_ops(ops);
    register_epilogue_ops(ops);
    for (const OpDef& op : ops) {
      KILN_CHECK(by_name.emplace(op.name, &op).second, "op '", op.name, "' declared twice");
      for (const std::string& a : op.aten)
        KILN_CHECK(by_aten.emplace(a, &op).second, "ATen overload ", a, " served by two ops");
      sorted.push_back(&op);
    }
    std::sort(sorted.begin(), sorted.end(), [](const OpDef* a, const OpDef* b) { return a->name < b->name; });
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

const AttrSpec* OpDef::attr_spec(std::string_view attr) const {
  for (const AttrSpec& s : attrs)
    if (s.name == attr) return &s;
  return nullptr;
}

const OpDef* find_op(std::string_view name) {
  auto it = table().by_name.find(name);
  return it == table().by_name.end() ? nullptr : it->second;
}

const OpDef& get_op(std::string_view name) {
  const OpDef* op = find_op(name);
  KILN_CHECK(op != nullptr, "unknown op '", name, "'");
  return *op;
}

const std::vector<const OpDef*>& all_ops() { return table().sorted; }

const OpDef* find_op_for_aten(std::string_view aten_overload) {
  auto it = table().by_aten.find(aten_overload);
  return it == table().by_aten.end() ? nullptr : it->second;
}

Attrs complete_attrs(const OpDef& op, const Attrs& given) {
  for (const auto& [name, value] : given.items()) {
    const AttrSpec* spec = op.attr_spec(name);
    if (spec == nullptr) {
      std::string valid;
      for (const AttrSpec& s : op.attrs) valid += (valid.empty() ? "" : ", ") + s.name;
      fail(ErrorKind::invalid_argument, "op '", op.name, "' has no attribute '", name, "' (valid: ",
           valid.empty() ? "none" : valid, ")");
    }
    bool int_as_float = spec->kind == AttrKind::float_ && attr_kind(value) == AttrKind::int_;
    KILN_CHECK(attr_kind(value) == spec->kind || int_as_float, "op '", op.name, "': attribute '", name,
               "' should be ", attr_kind_name(spec->kind), " but is ", attr_kind_name(attr_kind(value)));
  }
  Attrs full;
  for (const AttrSpec& spec : op.attrs) {
    const AttrValue* v = given.find(spec.name);
    if (v != nullptr) {
      if (spec.kind == AttrKind::float_ && attr_kind(*v) == AttrKind::int_)
        full.set(spec.name, static_cast<double>(std::get<int64_t>(*v)));
      else
        full.set(spec.name, *v);
    } else {
      KILN_CHECK(spec.default_value.has_value(), "op '", op.name, "': required attribute '", spec.name,
                 "' is missing");
      full.set(spec.name, *spec.default_value);
    }
  }
  return full;
}

std::vector<TensorType> infer_types(const OpDef& op, std::span<const TensorType> inputs, const Attrs& attrs,
                                    std::string_view node_name) {
  if (op.variadic) {
    KILN_CHECK(!inputs.empty(), "node '", node_name, "' (", op.name, "): needs at least one input");
  } else {
    size_t most = op.inputs.size(), least = most - static_cast<size_t>(op.optional_inputs);
    KILN_CHECK(inputs.size() >= least && inputs.size() <= most, "node '", node_name, "' (", op.name, "): expects ",
               least == most ? std::to_string(most) : std::to_string(least) + " to " + std::to_string(most),
               " inputs, got ", inputs.size());
  }
  try {
    return op.infer(inputs, attrs);
  } catch (const Error& e) {
    throw Error(e.kind(), str_cat("node '", node_name, "' (", op.name, "): ", e.what()));
  }
}

}  // namespace kiln
