// .npy reading and writing (see npy.h). The header is a Python dict literal;
// only the three keys NumPy writes are accepted, in any order.
#include "npy.h"

#include <cctype>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

namespace kiln::cli {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kMaxHeader = 1 << 16;
constexpr int64_t kMaxDim = int64_t{1} << 40;

struct Descr {
  const char* text;
  ElementType type;
};
constexpr Descr kDescrs[] = {
    {"<f4", ElementType::f32}, {"<f2", ElementType::f16}, {"<u2", ElementType::bf16}, {"<f8", ElementType::f64},
    {"<i8", ElementType::i64}, {"<i4", ElementType::i32}, {"<i2", ElementType::i16},  {"|i1", ElementType::i8},
    {"|u1", ElementType::u8},  {"|b1", ElementType::boolean},
};

[[noreturn]] void bad(const std::string& name, const std::string& what) {
  throw std::runtime_error(name + ": not a valid .npy file: " + what);
}

// A cursor over the header dict text.
struct Header {
  std::string_view s;
  size_t i = 0;
  const std::string& name;
  void skip() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool eat(char c) {
    skip();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) bad(name, std::string("header: expected '") + c + "' at " + std::to_string(i));
  }
  std::string quoted() {
    skip();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) bad(name, "header: expected a string at " + std::to_string(i));
    const char q = s[i++];
    size_t end = s.find(q, i);
    if (end == std::string_view::npos) bad(name, "header: unterminated string");
    std::string out(s.substr(i, end - i));
    i = end + 1;
    return out;
  }
  int64_t integer() {
    skip();
    int64_t v = 0;
    size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      v = v * 10 + (s[i++] - '0');
      if (v > kMaxDim) bad(name, "header: dimension too large");
    }
    if (i == start) bad(name, "header: expected a dimension at " + std::to_string(start));
    return v;
  }
  bool boolean() {
    skip();
    if (s.substr(i, 4) == "True") return i += 4, true;
    if (s.substr(i, 5) == "False") return i += 5, false;
    bad(name, "header: expected True or False");
  }
};

}  // namespace

std::string npy_descr(ElementType type) {
  for (const Descr& d : kDescrs)
    if (d.type == type) return d.text;
  throw std::runtime_error("no .npy dtype for element type " + std::string(element_type_name(type)));
}

Tensor parse_npy(std::string_view b, const std::string& name) {
  if (b.size() < kMagicSize + 4 || std::memcmp(b.data(), kMagic, kMagicSize) != 0) bad(name, "bad magic");
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(b[i]); };
  const int major = byte(6);
  size_t header_len, at;
  if (major == 1) {
    header_len = byte(8) | size_t(byte(9)) << 8;
    at = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) bad(name, "truncated header");
    header_len = byte(8) | size_t(byte(9)) << 8 | size_t(byte(10)) << 16 | size_t(byte(11)) << 24;
    at = 12;
  } else {
    bad(name, "unsupported version " + std::to_string(major));
  }
  if (header_len > kMaxHeader || header_len > b.size() - at) bad(name, "header length runs past the end of the file");
  Header h{b.substr(at, header_len), 0, name};
  std::string descr;
  bool have_descr = false, have_order = false, have_shape = false;
  Tensor t;
  h.expect('{');
  while (!h.eat('}')) {
    std::string key = h.quoted();
    h.expect(':');
    if (key == "descr") {
      descr = h.quoted();
      have_descr = true;
    } else if (key == "fortran_order") {
      if (h.boolean()) bad(name, "Fortran-ordered arrays are not supported (save a C-ordered copy)");
      have_order = true;
    } else if (key == "shape") {
      h.expect('(');
      while (!h.eat(')')) {
        if (t.shape.size() >= 64) bad(name, "header: too many dimensions");
        t.shape.push_back(h.integer());
        if (!h.eat(',')) {
          h.expect(')');
          break;
        }
      }
      have_shape = true;
    } else {
      bad(name, "header: unknown key '" + key + "'");
    }
    if (!h.eat(',')) {
      h.expect('}');
      break;
    }
  }
  if (!have_descr || !have_order || !have_shape) bad(name, "header lacks descr, fortran_order or shape");
  bool known = false;
  for (const Descr& d : kDescrs)
    if (descr == d.text || (descr == "<i1" && d.type == ElementType::i8) || (descr == "<u1" && d.type == ElementType::u8)) {
      t.dtype = d.type;
      known = true;
    }
  if (!known) bad(name, "dtype '" + descr + "' is not supported");
  unsigned __int128 numel = 1;
  for (int64_t d : t.shape) {
    numel *= static_cast<unsigned __int128>(d);
    if (numel > static_cast<unsigned __int128>(kMaxDim)) bad(name, "the array is too large");
  }
  const size_t data_at = at + header_len;
  const unsigned __int128 nbytes = numel * element_size(t.dtype);
  if (nbytes != b.size() - data_at)
    bad(name, "the header says " + std::to_string(static_cast<uint64_t>(nbytes)) + " data bytes, the file holds " +
                  std::to_string(b.size() - data_at));
  t.bytes.resize(static_cast<size_t>(nbytes));
  if (!t.bytes.empty()) std::memcpy(t.bytes.data(), b.data() + data_at, t.bytes.size());
  return t;
}

Tensor read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open '" + path + "'");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_npy(bytes, path);
}

void write_npy(const std::string& path, const Tensor& t) {
  std::string shape;
  for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape[i]);
  if (t.shape.size() == 1) shape += ",";  // Python's one-element tuple
  std::string header = "{'descr': '" + npy_descr(t.dtype) + "', 'fortran_order': False, 'shape': (" + shape + ")";
  header += ", }";
  const size_t unpadded = kMagicSize + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("cannot create '" + path + "'");
  out.write(kMagic, kMagicSize);
  out.put(1).put(0);
  out.put(static_cast<char>(header.size() & 0xff)).put(static_cast<char>(header.size() >> 8));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
  if (!out) throw std::runtime_error("cannot write '" + path + "'");
}

}  // namespace kiln::cli
