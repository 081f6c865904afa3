// Node attributes: a small ordered name -> value map with typed values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ir/dtype.h"

namespace kiln {

using AttrValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, DType>;

enum class AttrKind : uint8_t { int_, float_, bool_, string, ints, dtype };
AttrKind attr_kind(const AttrValue& v);
std::string_view attr_kind_name(AttrKind k);

// Text form used by the IR printer: 3, 2.5, true, "s", [1,2], f32.
std::string attr_to_string(const AttrValue& v);

class Attrs {
 public:
  void set(std::string name, AttrValue value);
  const AttrValue* find(std::string_view name) const;
  bool has(std::string_view name) const { return find(name) != nullptr; }

  // Typed getters: throw kiln::Error naming the attribute when missing or mistyped.
  int64_t get_int(std::string_view name) const;
  double get_float(std::string_view name) const;  // accepts ints too
  bool get_bool(std::string_view name) const;
  const std::string& get_string(std::string_view name) const;
  const std::vector<int64_t>& get_ints(std::string_view name) const;
  DType get_dtype(std::string_view name) const;

  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool empty() const { return items_.empty(); }
  bool operator==(const Attrs&) const = default;

 private:
  std::vector<std::pair<std::string, AttrValue>> items_;  // sorted by name
};

}  // namespace kiln
