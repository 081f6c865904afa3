// AtenCall argument access and the adapter registry.
#include "builder/aten_call.h"

#include "support/error.h"

namespace kiln {

const AtenArg* AtenCall::find(std::string_view name) const {
  auto it = args_.find(name);
  if (it == args_.end() || std::holds_alternative<std::monostate>(it->second)) return nullptr;
  return &it->second;
}

bool AtenCall::has(std::string_view name) const { return find(name) != nullptr; }

void AtenCall::unsupported(const std::string& why) const {
  fail(ErrorKind::unsupported, target_, ": ", why);
}

Value* AtenCall::tensor(std::string_view name) const {
  const AtenArg* a = find(name);
  if (a == nullptr || !std::holds_alternative<Value*>(*a)) unsupported(str_cat("argument '", name, "' is not a tensor"));
  return std::get<Value*>(*a);
}

Value* AtenCall::opt_tensor(std::string_view name) const { return has(name) ? tensor(name) : nullptr; }

std::vector<Value*> AtenCall::opt_tensors(std::string_view name) const {
  const AtenArg* a = find(name);
  if (a == nullptr || !std::holds_alternative<std::vector<Value*>>(*a))
    unsupported(str_cat("argument '", name, "' is not a list of tensors"));
  return std::get<std::vector<Value*>>(*a);
}

std::vector<Value*> AtenCall::tensors(std::string_view name) const {
  std::vector<Value*> values = opt_tensors(name);
  for (const Value* v : values)
    if (v == nullptr) unsupported(str_cat("argument '", name, "' has a None element"));
  return values;
}

Operand AtenCall::operand(std::string_view name) const {
  const AtenArg* a = find(name);
  if (a == nullptr) unsupported(str_cat("argument '", name, "' is missing"));
  if (const auto* v = std::get_if<Value*>(a)) return *v;
  if (const auto* d = std::get_if<double>(a)) return *d;
  if (const auto* i = std::get_if<int64_t>(a)) return *i;
  if (const auto* f = std::get_if<bool>(a)) return *f;
  unsupported(str_cat("argument '", name, "' is not a tensor or a number"));
}

int64_t AtenCall::int_(std::string_view name) const {
  const AtenArg* a = find(name);
  if (a == nullptr) unsupported(str_cat("argument '", name, "' is missing"));
  if (const auto* i = std::get_if<int64_t>(a)) return *i;
  if (const auto* f = std::get_if<bool>(a)) return *f ? 1 : 0;
  unsupported(str_cat("argument '", name, "' is not an int"));
}

int64_t AtenCall::int_or(std::string_view name, int64_t fallback) const { return has(name) ? int_(name) : fallback; }

double AtenCall::number(std::string_view name) const {
  const AtenArg* a = find(name);
  if (a == nullptr) unsupported(str_cat("argument '", name, "' is missing"));
  if (const auto* d = std::get_if<double>(a)) return *d;
  if (const auto* i = std::get_if<int64_t>(a)) return static_cast<double>(*i);
  if (const auto* f = std::get_if<bool>(a)) return *f ? 1.0 : 0.0;
  unsupported(str_cat("argument '", name, "' is not a number"));
}

double AtenCall::number_or(std::string_view name, double fallback) const {
  return has(name) ? number(name) : fallback;
}

bool AtenCall::flag_or(std::string_view name, bool fallback) const {
  const AtenArg* a = find(name);
  if (a == nullptr) return fallback;
  if (const auto* f = std::get_if<bool>(a)) return *f;
  if (const auto* i = std::get_if<int64_t>(a)) return *i != 0;
  unsupported(str_cat("argument '", name, "' is not a bool"));
}

std::vector<int64_t> AtenCall::ints(std::string_view name) const {
  const AtenArg* a = find(name);
  if (a == nullptr) unsupported(str_cat("argument '", name, "' is missing"));
  if (const auto* v = std::get_if<std::vector<int64_t>>(a)) return *v;
  if (const auto* i = std::get_if<int64_t>(a)) return {*i};
  unsupported(str_cat("argument '", name, "' is not a list of ints"));
}

std::vector<int64_t> AtenCall::ints_or(std::string_view name, std::vector<int64_t> fallback) const {
  return has(name) ? ints(name) : fallback;
}

std::optional<DType> AtenCall::dtype(std::string_view name) const {
  const AtenArg* a = find(name);
  if (a == nullptr) return std::nullopt;
  if (const auto* d = std::get_if<DType>(a)) return *d;
  unsupported(str_cat("argument '", name, "' is not a dtype"));
}

std::string AtenCall::string_or(std::string_view name, std::string fallback) const {
  const AtenArg* a = find(name);
  if (a == nullptr) return fallback;
  if (const auto* s = std::get_if<std::string>(a)) return *s;
  unsupported(str_cat("argument '", name, "' is not a string"));
}

namespace {
const aten_internal::AdapterMap& adapters() {
  static const aten_internal::AdapterMap map = [] {
    aten_internal::AdapterMap m;
    aten_internal::register_elementwise_adapters(m);
    aten_internal::register_shape_adapters(m);
    aten_internal::register_nn_adapters(m);
    aten_internal::register_reduction_adapters(m);
    aten_internal::register_attention_adapters(m);
    return m;
  }();
  return map;
}
}  // namespace

const AtenAdapter* find_aten_adapter(std::string_view target) {
  auto it = adapters().find(target);
  return it == adapters().end() ? nullptr : &it->second;
}

std::vector<std::string> aten_targets() {
  std::vector<std::string> out;
  for (const auto& [name, fn] : adapters()) out.push_back(name);
  return out;
}

}  // namespace kiln
