// Attrs: sorted storage, typed access, text form.
#include "ir/attr.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "support/error.h"

namespace kiln {

AttrKind attr_kind(const AttrValue& v) { return static_cast<AttrKind>(v.index()); }

std::string_view attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::int_: return "int";
    case AttrKind::float_: return "float";
    case AttrKind::bool_: return "bool";
    case AttrKind::string: return "string";
    case AttrKind::ints: return "ints";
    case AttrKind::dtype: return "dtype";
  }
  return "?";
}

namespace {
// Shortest text that parses back to exactly the same double, always with a '.',
// 'e', "inf" or "nan" so that the parser can tell it from an int.
std::string float_text(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}
}  // namespace

std::string attr_to_string(const AttrValue& v) {
  std::ostringstream out;
  switch (attr_kind(v)) {
    case AttrKind::int_: out << std::get<int64_t>(v); break;
    case AttrKind::float_: out << float_text(std::get<double>(v)); break;
    case AttrKind::bool_: out << (std::get<bool>(v) ? "true" : "false"); break;
    case AttrKind::string: {
      out << '"';
      for (char c : std::get<std::string>(v)) {
        if (c == '"' || c == '\\') out << '\\';
        out << c;
      }
      out << '"';
      break;
    }
    case AttrKind::ints: {
      out << '[';
      const auto& xs = std::get<std::vector<int64_t>>(v);
      for (size_t i = 0; i < xs.size(); ++i) out << (i ? "," : "") << xs[i];
      out << ']';
      break;
    }
    case AttrKind::dtype: out << dtype_name(std::get<DType>(v)); break;
  }
  return out.str();
}

void Attrs::set(std::string name, AttrValue value) {
  auto it = std::lower_bound(items_.begin(), items_.end(), name,
                             [](const auto& item, const std::string& n) { return item.first < n; });
  if (it != items_.end() && it->first == name) {
    it->second = std::move(value);
  } else {
    items_.insert(it, {std::move(name), std::move(value)});
  }
}

const AttrValue* Attrs::find(std::string_view name) const {
  auto it = std::lower_bound(items_.begin(), items_.end(), name,
                             [](const auto& item, std::string_view n) { return item.first < n; });
  if (it != items_.end() && it->first == name) return &it->second;
  return nullptr;
}

namespace {
template <typename T>
const T& typed(const Attrs& attrs, std::string_view name, AttrKind want) {
  const AttrValue* v = attrs.find(name);
  KILN_CHECK(v != nullptr, "missing attribute '", name, "'");
  KILN_CHECK(std::holds_alternative<T>(*v), "attribute '", name, "' should be ", attr_kind_name(want),
             " but is ", attr_kind_name(attr_kind(*v)));
  return std::get<T>(*v);
}
}  // namespace

int64_t Attrs::get_int(std::string_view name) const { return typed<int64_t>(*this, name, AttrKind::int_); }
double Attrs::get_float(std::string_view name) const {
  const AttrValue* v = find(name);
  if (v && std::holds_alternative<int64_t>(*v)) return static_cast<double>(std::get<int64_t>(*v));
  return typed<double>(*this, name, AttrKind::float_);
}
bool Attrs::get_bool(std::string_view name) const { return typed<bool>(*this, name, AttrKind::bool_); }
const std::string& Attrs::get_string(std::string_view name) const {
  return typed<std::string>(*this, name, AttrKind::string);
}
const std::vector<int64_t>& Attrs::get_ints(std::string_view name) const {
  return typed<std::vector<int64_t>>(*this, name, AttrKind::ints);
}
DType Attrs::get_dtype(std::string_view name) const { return typed<DType>(*this, name, AttrKind::dtype); }

}  // namespace kiln
