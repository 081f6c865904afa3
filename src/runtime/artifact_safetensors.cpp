// The safetensors reader (runtime/artifact_safetensors.h): a strict JSON
// subset parser for the header and the checks on every tensor entry.
#include "runtime/artifact_safetensors.h"

#include <algorithm>
#include <set>

#include "ir/parser.h"
#include "support/error.h"

namespace kiln {

namespace {

constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;  // the safetensors package's own limit
constexpr int kMaxDepth = 8;

struct DTypeName {
  const char* name;
  DType dtype;
};
constexpr DTypeName kDTypes[] = {{"F32", DType::f32}, {"F16", DType::f16}, {"BF16", DType::bf16},
                                 {"F64", DType::f64}, {"I64", DType::i64}, {"I32", DType::i32},
                                 {"I16", DType::i16}, {"I8", DType::i8},   {"U8", DType::u8},
                                 {"BOOL", DType::boolean}};

// A parsed JSON value: only what a safetensors header holds.
struct Json {
  enum Kind { string, integer, array, object, other } kind = other;
  std::string text;
  uint64_t number = 0;
  std::vector<Json> items;       // array elements, or object values
  std::vector<std::string> keys;  // object keys (keys[i] names items[i])
};

class JsonParser {
 public:
  JsonParser(std::string_view s, const std::string& file) : s_(s), file_(file) {}

  Json document() {
    Json v = value(0);
    skip();
    if (i_ != s_.size()) bad("unexpected text after the header's JSON");
    return v;
  }

  [[noreturn]] void bad(const std::string& what) const {
    fail(ErrorKind::corrupt_file, "bad safetensors file '", file_, "': header byte ", i_, ": ", what);
  }

 private:
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  void expect(char c) {
    if (!eat(c)) bad(std::string("expected '") + c + "'");
  }

  Json value(int depth) {
    if (depth > kMaxDepth) bad("nested too deeply");
    skip();
    if (i_ >= s_.size()) bad("unexpected end of the header");
    Json v;
    const char c = s_[i_];
    if (c == '"') {
      v.kind = Json::string;
      v.text = string();
    } else if (c >= '0' && c <= '9') {
      v.kind = Json::integer;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (v.number > (UINT64_MAX - 9) / 10) bad("integer out of range");
        v.number = v.number * 10 + static_cast<uint64_t>(s_[i_++] - '0');
      }
    } else if (c == '[') {
      v.kind = Json::array;
      ++i_;
      if (!eat(']')) {
        do v.items.push_back(value(depth + 1));
        while (eat(','));
        expect(']');
      }
    } else if (c == '{') {
      v.kind = Json::object;
      ++i_;
      if (!eat('}')) {
        do {
          skip();
          if (i_ >= s_.size() || s_[i_] != '"') bad("expected a key");
          std::string key = string();
          expect(':');
          v.keys.push_back(std::move(key));
          v.items.push_back(value(depth + 1));
        } while (eat(','));
        expect('}');
      }
    } else {
      bad("unexpected character (only strings, non-negative integers, arrays and objects are expected)");
    }
    return v;
  }

  std::string string() {
    ++i_;  // the opening quote
    std::string out;
    while (true) {
      if (i_ >= s_.size()) bad("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) bad("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) bad("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (s_.size() - i_ < 4) bad("short \\u escape");
          unsigned code = 0;
          for (int k = 0; k < 4; ++k) {
            const char h = s_[i_++];
            code <<= 4;
            if (h >= '0' && h <= '9') code |= h - '0';
            else if (h >= 'a' && h <= 'f') code |= h - 'a' + 10;
            else if (h >= 'A' && h <= 'F') code |= h - 'A' + 10;
            else bad("bad \\u escape");
          }
          // UTF-8 of the code unit (surrogates kept as they are: names are compared as bytes).
          if (code < 0x80) {
            out += static_cast<char>(code);
          } else if (code < 0x800) {
            out += static_cast<char>(0xc0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3f));
          } else {
            out += static_cast<char>(0xe0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (code & 0x3f));
          }
          break;
        }
        default: bad("bad escape");
      }
    }
  }

  std::string_view s_;
  const std::string& file_;
  size_t i_ = 0;
};

}  // namespace

std::shared_ptr<const SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->map_ = std::make_unique<MappedFile>(path);
  f->bytes_ = f->map_->bytes();
  f->parse(path);
  return f;
}

std::shared_ptr<const SafetensorsFile> SafetensorsFile::from_bytes(std::vector<uint8_t> bytes, const std::string& name) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->owned_ = std::move(bytes);
  f->bytes_ = f->owned_;
  f->parse(name);
  return f;
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  for (const SafetensorsEntry& e : tensors_)
    if (e.name == name) return &e;
  return nullptr;
}

void SafetensorsFile::parse(const std::string& file) {
  auto corrupt = [&](const auto&... parts) {
    fail(ErrorKind::corrupt_file, "bad safetensors file '", file, "': ", parts...);
  };
  if (bytes_.size() < 8) corrupt("the file is ", bytes_.size(), " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes_[i];
  if (n > kMaxHeaderBytes || n > bytes_.size() - 8)
    corrupt("the header length ", n, " runs past the end of the file (", bytes_.size(), " bytes)");
  const std::string_view text(reinterpret_cast<const char*>(bytes_.data() + 8), n);
  JsonParser parser(text, file);
  const Json doc = parser.document();
  if (doc.kind != Json::object) corrupt("the header is not a JSON object");
  const std::span<const uint8_t> data = bytes_.subspan(8 + n);
  std::set<std::string> seen;
  for (size_t t = 0; t < doc.keys.size(); ++t) {
    const std::string& name = doc.keys[t];
    const Json& v = doc.items[t];
    if (!seen.insert(name).second) corrupt("tensor '", name, "' appears twice");
    if (name == "__metadata__") {
      if (v.kind != Json::object) corrupt("__metadata__ is not an object");
      for (size_t i = 0; i < v.keys.size(); ++i) {
        const std::string& k = v.keys[i];
        const Json& m = v.items[i];
        if (m.kind != Json::string) corrupt("__metadata__ '", k, "' is not a string");
        metadata_[k] = m.text;
      }
      continue;
    }
    if (v.kind != Json::object) corrupt("tensor '", name, "' is not an object");
    const Json *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
    for (size_t i = 0; i < v.keys.size(); ++i) {
      const std::string& k = v.keys[i];
      const Json& m = v.items[i];
      if (k == "dtype") dtype = &m;
      else if (k == "shape") shape = &m;
      else if (k == "data_offsets") offsets = &m;
      else corrupt("tensor '", name, "': unknown field '", k, "'");
    }
    if (!dtype || !shape || !offsets) corrupt("tensor '", name, "' lacks dtype, shape or data_offsets");
    SafetensorsEntry e{name, DType::f32, {}, {}};
    if (dtype->kind != Json::string) corrupt("tensor '", name, "': dtype is not a string");
    const auto known = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                                    [&](const DTypeName& d) { return dtype->text == d.name; });
    if (known == std::end(kDTypes)) corrupt("tensor '", name, "': dtype '", dtype->text, "' is not supported by kiln");
    e.dtype = known->dtype;
    if (shape->kind != Json::array || shape->items.size() > kMaxParsedRank)
      corrupt("tensor '", name, "': shape is not an array of at most ", kMaxParsedRank, " dims");
    unsigned __int128 numel = 1;
    for (const Json& d : shape->items) {
      if (d.kind != Json::integer || d.number > static_cast<uint64_t>(kMaxParsedNumel))
        corrupt("tensor '", name, "': a dim is not an integer in range");
      e.shape.push_back(static_cast<int64_t>(d.number));
      numel *= d.number;
      if (numel > static_cast<unsigned __int128>(kMaxParsedNumel)) corrupt("tensor '", name, "' is too large");
    }
    if (offsets->kind != Json::array || offsets->items.size() != 2 || offsets->items[0].kind != Json::integer ||
        offsets->items[1].kind != Json::integer)
      corrupt("tensor '", name, "': data_offsets is not [begin, end]");
    const uint64_t begin = offsets->items[0].number, end = offsets->items[1].number;
    if (begin > end || end > data.size())
      corrupt("tensor '", name, "': data_offsets [", begin, ", ", end, "] are outside the data (", data.size(),
              " bytes)");
    const unsigned __int128 want = numel * dtype_size(e.dtype);
    if (want != end - begin)
      corrupt("tensor '", name, "': ", end - begin, " bytes of data, but its dtype and shape need ",
              static_cast<uint64_t>(want));
    e.data = data.subspan(begin, end - begin);
    tensors_.push_back(std::move(e));
  }
}

}  // namespace kiln
