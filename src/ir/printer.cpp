// The IR text printer. Format in docs/ir.md; the parser (parser.cpp) reads it
// back exactly, so every choice here (quoting, number text) is made so that
// the text determines the graph's bits.
#include "ir/printer.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "ir/graph.h"
#include "ops/op_def.h"
#include "support/half.h"

namespace kiln {

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

template <typename T>
T read(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

uint64_t raw_bits(const uint8_t* p, size_t size) {
  uint64_t bits = 0;
  std::memcpy(&bits, p, size);  // little-endian hosts only, like the rest of kiln
  return bits;
}

template <typename F>
std::string shortest_float(F f) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, f);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // "3" -> "3.0"; "inf" has an 'n'
  return s;
}

std::string hex_bits(uint64_t bits, size_t size) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s = "0x";
  for (size_t i = size * 2; i-- > 0;) s += kDigits[(bits >> (4 * i)) & 0xf];
  return s;
}

std::string attr_text(const AttrValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return quote_string(*s);
  return attr_to_string(v);
}

// Attribute names are read as identifiers, which start with a letter or '_'.
std::string attr_name_text(const std::string& name) {
  bool ident = is_bare_name(name) && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
  return ident ? name : quote_string(name);
}

void print_block(std::ostringstream& out, const Graph& g, int indent);

// Tolerates broken graphs (null values) so that the verifier can print them.
std::string ref(const Value* v) { return v ? value_ref(v->name) : std::string("%<null>"); }

void print_node_to(std::ostringstream& out, const Node& n, int indent) {
  for (size_t i = 0; i < n.outputs.size(); ++i) out << (i ? ", " : "") << ref(n.outputs[i]);
  if (!n.outputs.empty()) out << " = ";
  out << (n.op ? n.op->name : std::string("<null-op>")) << '(';
  for (size_t i = 0; i < n.inputs.size(); ++i) out << (i ? ", " : "") << ref(n.inputs[i]);
  out << ')';
  if (!n.attrs.empty()) {
    out << " {";
    bool first = true;
    for (const auto& [name, value] : n.attrs.items()) {
      out << (first ? "" : ", ") << attr_name_text(name) << '=' << attr_text(value);
      first = false;
    }
    out << '}';
  }
  if (!n.outputs.empty()) {
    out << " : ";
    for (size_t i = 0; i < n.outputs.size(); ++i)
      out << (i ? ", " : "") << (n.outputs[i] ? to_string(n.outputs[i]->type) : "?");
  }
  if (n.outputs.empty() || n.outputs[0] == nullptr || n.name != n.outputs[0]->name)
    out << " @" << (is_bare_name(n.name) ? n.name : quote_string(n.name));
  if (n.body) {
    out << " {\n";
    print_block(out, *n.body, indent + 1);
    out << std::string(2 * static_cast<size_t>(indent), ' ') << '}';
  }
}

void print_block(std::ostringstream& out, const Graph& g, int indent) {
  std::string pad(2 * static_cast<size_t>(indent), ' ');
  for (const Value* v : g.inputs()) out << pad << "input " << value_ref(v->name) << " : " << to_string(v->type) << '\n';
  for (const Value* v : g.weights())
    out << pad << "weight " << value_ref(v->name) << " : " << to_string(v->type) << " = " << quote_string(v->weight_key)
        << '\n';
  for (const Value* v : g.literals()) {
    out << pad << "literal " << value_ref(v->name) << " : " << to_string(v->type) << " = [";
    size_t size = dtype_size(v->type.dtype);
    // Print what the bytes hold; the verifier reports a size mismatch.
    for (size_t off = 0, i = 0; off + size <= v->literal_data.size(); off += size, ++i)
      out << (i ? ", " : "") << literal_element_to_string(v->literal_data.data() + off, v->type.dtype);
    out << "]\n";
  }
  for (const Node* n : g.nodes()) {
    out << pad;
    print_node_to(out, *n, indent);
    out << '\n';
  }
  out << pad << "return";
  for (size_t i = 0; i < g.outputs().size(); ++i) out << (i ? ", " : " ") << ref(g.outputs()[i]);
  out << '\n';
}

}  // namespace

bool is_bare_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name)
    if (!is_name_char(c)) return false;
  return true;
}

std::string quote_string(std::string_view s) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          out += "\\x";
          out += kDigits[u >> 4];
          out += kDigits[u & 0xf];
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string value_ref(std::string_view name) {
  std::string out = "%";
  out += is_bare_name(name) ? std::string(name) : quote_string(name);
  return out;
}

uint64_t canonical_nan_bits(DType dtype, bool negative) {
  float qnan = std::numeric_limits<float>::quiet_NaN();
  if (negative) qnan = -qnan;
  switch (dtype) {
    case DType::f32: return float_bits(qnan);
    case DType::f16: return Half(qnan).bits;
    case DType::bf16: return BFloat16(qnan).bits;
    case DType::f64: {
      double d = std::numeric_limits<double>::quiet_NaN();
      if (negative) d = -d;
      uint64_t bits;
      std::memcpy(&bits, &d, 8);
      return bits;
    }
    default: return 0;
  }
}

std::string literal_element_to_string(const uint8_t* p, DType dtype) {
  double as_double = 0;  // for the NaN test of floating dtypes
  std::string text;
  switch (dtype) {
    case DType::f32: {
      float f = read<float>(p);
      as_double = f;
      text = shortest_float(f);
      break;
    }
    case DType::f64: {
      double d = read<double>(p);
      as_double = d;
      text = shortest_float(d);
      break;
    }
    case DType::f16: {
      float f = static_cast<float>(read<Half>(p));  // exact: every half is a float
      as_double = f;
      text = shortest_float(f);
      break;
    }
    case DType::bf16: {
      float f = static_cast<float>(read<BFloat16>(p));
      as_double = f;
      text = shortest_float(f);
      break;
    }
    case DType::i64: return std::to_string(read<int64_t>(p));
    case DType::i32: return std::to_string(read<int32_t>(p));
    case DType::i16: return std::to_string(read<int16_t>(p));
    case DType::i8: return std::to_string(read<int8_t>(p));
    case DType::u8: return std::to_string(read<uint8_t>(p));
    case DType::boolean: {
      uint8_t b = read<uint8_t>(p);
      return b == 0 ? "false" : b == 1 ? "true" : std::to_string(b);
    }
  }
  if (std::isnan(as_double)) {
    size_t size = dtype_size(dtype);
    uint64_t bits = raw_bits(p, size);
    if (bits == canonical_nan_bits(dtype, false)) return "nan";
    if (bits == canonical_nan_bits(dtype, true)) return "-nan";
    return hex_bits(bits, size);
  }
  return text;
}

std::string print_node(const Node& node) {
  std::ostringstream out;
  print_node_to(out, node, 0);
  return out.str();
}

std::string print_graph(const Graph& graph) {
  std::ostringstream out;
  out << "graph {\n";
  print_block(out, graph, 1);
  out << "}\n";
  return out.str();
}

}  // namespace kiln
