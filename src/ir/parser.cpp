// The IR text parser (format in docs/ir.md). A lexer turns the text into
// tokens with line:column positions; a recursive-descent parser builds the
// Graph through its public API (add_input, add_node_typed, ...). Every error
// is a kiln::Error "line L:C: expected ..., got ..."; sizes are checked before
// anything is allocated from them.
#include "ir/parser.h"

#include <charconv>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "ir/printer.h"
#include "ops/op_def.h"
#include "support/error.h"
#include "support/half.h"

namespace kiln {

namespace {

enum class Tok { end, ident, number, string, value, node_name, punct };

struct Token {
  Tok kind = Tok::end;
  std::string text;  // identifier, number text, decoded string or name, or the punctuation char
  int line = 0, col = 0;
};

template <typename... Parts>
[[noreturn]] void fail_at(const Token& t, Parts&&... parts) {
  fail(ErrorKind::invalid_argument, "line ", t.line, ":", t.col, ": ", std::forward<Parts>(parts)...);
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::end: return "end of input";
    case Tok::ident: return str_cat("'", t.text, "'");
    case Tok::number: return str_cat("number ", t.text);
    case Tok::string: return str_cat("string ", quote_string(t.text));
    case Tok::value: return value_ref(t.text);
    case Tok::node_name: return str_cat("@", quote_string(t.text));
    case Tok::punct: return str_cat("'", t.text, "'");
  }
  return "?";
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      skip_space();
      Token t;
      t.line = line_;
      t.col = col_;
      if (pos_ >= text_.size()) {
        out.push_back(t);
        return out;
      }
      char c = text_[pos_];
      if (std::strchr("{}()[],:=", c) != nullptr) {
        t.kind = Tok::punct;
        t.text = std::string(1, c);
        advance();
      } else if (c == '%' || c == '@') {
        advance();
        t.kind = c == '%' ? Tok::value : Tok::node_name;
        if (pos_ < text_.size() && text_[pos_] == '"') {
          t.text = read_string(t);
        } else {
          t.text = read_while(is_name_char);
          if (t.text.empty()) fail_at(t, "expected a name after '", std::string(1, c), "'");
        }
      } else if (c == '"') {
        t.kind = Tok::string;
        t.text = read_string(t);
      } else if (is_alpha(c)) {
        t.kind = Tok::ident;
        t.text = read_while(is_name_char);
      } else if (is_digit(c) || ((c == '-' || c == '+' || c == '.') && pos_ + 1 < text_.size() &&
                                 (is_name_char(text_[pos_ + 1])))) {
        t.kind = Tok::number;
        t.text = read_number();
      } else {
        unsigned char u = static_cast<unsigned char>(c);
        std::string shown = (u >= 0x20 && u < 0x7f) ? std::string(1, c) : quote_string(std::string(1, c));
        fail_at(t, "unexpected character '", shown, "'");
      }
      out.push_back(std::move(t));
    }
  }

 private:
  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  void skip_space() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') advance();
      } else {
        return;
      }
    }
  }
  std::string read_while(bool (*pred)(char)) {
    size_t start = pos_;
    while (pos_ < text_.size() && pred(text_[pos_])) advance();
    return std::string(text_.substr(start, pos_ - start));
  }
  std::string read_number() {
    size_t start = pos_;
    advance();  // sign, digit or '.'
    bool hex = text_.substr(start, 2) == "0x" || text_.substr(start, 2) == "0X";
    while (pos_ < text_.size()) {
      char c = text_[pos_], prev = text_[pos_ - 1];
      bool exponent_sign = (c == '+' || c == '-') && !hex && (prev == 'e' || prev == 'E');
      if (!is_name_char(c) && !exponent_sign) break;
      advance();
    }
    return std::string(text_.substr(start, pos_ - start));
  }
  int hex_digit(char c) {
    if (is_digit(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  std::string read_string(const Token& at) {
    advance();  // opening quote
    std::string s;
    for (;;) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') fail_at(at, "unterminated string (missing closing '\"')");
      char c = text_[pos_];
      advance();
      if (c == '"') return s;
      if (c != '\\') {
        s += c;
        continue;
      }
      if (pos_ >= text_.size()) fail_at(at, "unterminated string (missing closing '\"')");
      char e = text_[pos_];
      advance();
      switch (e) {
        case '"': s += '"'; break;
        case '\\': s += '\\'; break;
        case 'n': s += '\n'; break;
        case 't': s += '\t'; break;
        case 'r': s += '\r'; break;
        case 'x': {
          int hi = pos_ < text_.size() ? hex_digit(text_[pos_]) : -1;
          int lo = pos_ + 1 < text_.size() ? hex_digit(text_[pos_ + 1]) : -1;
          if (hi < 0 || lo < 0) fail_at(at, "bad escape in string: \\x needs two hex digits");
          advance();
          advance();
          s += static_cast<char>(hi * 16 + lo);
          break;
        }
        default: fail_at(at, "bad escape '\\", std::string(1, e), "' in string");
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

// Full-token numeric conversions; false when the text is not exactly a number.
template <typename T>
bool to_number(std::string_view s, T& out, int base = 10) {
  if (s.empty()) return false;
  auto r = base == 10 ? std::from_chars(s.data(), s.data() + s.size(), out)
                      : std::from_chars(s.data(), s.data() + s.size(), out, base);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}
template <typename F>
bool to_float(std::string_view s, F& out) {
  if (s == "inf" || s == "-inf") {
    out = s[0] == '-' ? -std::numeric_limits<F>::infinity() : std::numeric_limits<F>::infinity();
    return true;
  }
  if (s.empty() || s[0] == '+' || s.find_first_of("xX") != std::string_view::npos) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : toks_(std::move(toks)) {}

  std::unique_ptr<Graph> parse() {
    const Token& g = next();
    if (g.kind != Tok::ident || g.text != "graph") fail_at(g, "expected 'graph' at the start, got ", describe(g));
    expect("{", "after 'graph'");
    auto graph = std::make_unique<Graph>();
    parse_block(*graph, 0);
    if (peek().kind != Tok::end) fail_at(peek(), "unexpected ", describe(peek()), " after the end of the graph");
    return graph;
  }

 private:
  struct Scope {
    std::unordered_map<std::string, std::pair<Value*, const Token*>> values;
  };

  const Token& peek(size_t ahead = 0) const {
    size_t i = std::min(pos_ + ahead, toks_.size() - 1);
    return toks_[i];
  }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  static bool is(const Token& t, const char* punct) { return t.kind == Tok::punct && t.text == punct; }
  const Token& expect(const char* punct, const char* context) {
    const Token& t = next();
    if (!is(t, punct)) fail_at(t, "expected '", punct, "' ", context, ", got ", describe(t));
    return t;
  }
  const Token& expect_kind(Tok kind, const char* what) {
    const Token& t = next();
    if (t.kind != kind) fail_at(t, "expected ", what, ", got ", describe(t));
    return t;
  }

  // Graph API errors (duplicate names, literal sizes) get the statement's position.
  template <typename F>
  auto at(const Token& t, F&& f) {
    try {
      return f();
    } catch (const Error& e) {
      fail_at(t, e.what());
    }
  }

  void define(Scope& scope, const Token& t, Value* v) { scope.values[t.text] = {v, &t}; }
  void check_fresh(const Scope& scope, const Token& t) {
    auto it = scope.values.find(t.text);
    if (it != scope.values.end())
      fail_at(t, "value ", value_ref(t.text), " is defined twice (first at line ", it->second.second->line, ":",
              it->second.second->col, ")");
  }
  Value* use(const Scope& scope, const Token& t) {
    auto it = scope.values.find(t.text);
    if (it == scope.values.end())
      fail_at(t, "undefined value ", value_ref(t.text), " (values must be defined before they are used)");
    return it->second.first;
  }

  int64_t parse_int(const Token& t, const char* what) {
    if (t.kind != Tok::number) fail_at(t, "expected ", what, ", got ", describe(t));
    int64_t v = 0;
    if (!to_number(t.text, v)) fail_at(t, "malformed or out-of-range integer '", t.text, "' for ", what);
    return v;
  }

  Dims parse_int_list(const char* close, const char* what, bool non_negative, size_t max_len = kMaxParsedRank) {
    Dims out;
    if (is(peek(), close)) {
      next();
      return out;
    }
    for (;;) {
      const Token& t = next();
      int64_t v = parse_int(t, what);
      if (non_negative && v < 0) fail_at(t, what, " must not be negative, got ", v);
      if (out.size() >= max_len) fail_at(t, "too many ", what, "s (at most ", max_len, ")");
      out.push_back(v);
      const Token& sep = next();
      if (is(sep, close)) return out;
      if (!is(sep, ",")) fail_at(sep, "expected ',' or '", close, "' in the list of ", what, "s, got ", describe(sep));
    }
  }

  TensorType parse_type() {
    const Token& d = next();
    if (d.kind != Tok::ident) fail_at(d, "expected a tensor type like f32[2,3], got ", describe(d));
    std::optional<DType> dtype = parse_dtype(d.text);
    if (!dtype) fail_at(d, "unknown dtype '", d.text, "'");
    const Token& open = expect("[", "after the dtype");
    Dims dims = parse_int_list("]", "dim", true);
    int64_t n = 1;
    for (int64_t x : dims)
      if (__builtin_mul_overflow(n, x, &n) || x > kMaxParsedNumel || n > kMaxParsedNumel)
        fail_at(open, "type ", d.text, "[", dims_to_string(dims), "] has too many elements (at most 2^48)");
    // Strides follow as {..}; a body's '{' is never followed by a number or '}'.
    if (is(peek(), "{") && (peek(1).kind == Tok::number || is(peek(1), "}"))) {
      const Token& brace = next();
      Dims strides = parse_int_list("}", "stride", true);
      if (strides.size() != dims.size())
        fail_at(brace, "type has ", dims.size(), " dims but ", strides.size(), " strides");
      int64_t span = 0;
      for (size_t i = 0; i < dims.size(); ++i) {
        int64_t term = 0;
        if (dims[i] > 0 && (__builtin_mul_overflow(dims[i] - 1, strides[i], &term) ||
                            __builtin_add_overflow(span, term, &span) || span > kMaxParsedNumel))
          fail_at(brace, "strides {", dims_to_string(strides), "} span too many elements");
      }
      return TensorType(*dtype, std::move(dims), std::move(strides));
    }
    return TensorType(*dtype, std::move(dims));
  }

  void parse_element(const Token& t, DType dtype, uint8_t* out) {
    auto bad = [&](const char* why) { fail_at(t, why, " '", t.text, "' for a ", dtype_name(dtype), " literal"); };
    if (t.kind != Tok::number && t.kind != Tok::ident) fail_at(t, "expected a literal element, got ", describe(t));
    const std::string& s = t.text;
    size_t size = dtype_size(dtype);
    if (is_floating(dtype)) {
      uint64_t bits = 0;
      if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {  // raw bits
        if (s.size() - 2 > 2 * size || !to_number(std::string_view(s).substr(2), bits, 16))
          bad("malformed hex bits");
      } else if (s == "nan" || s == "-nan") {
        bits = canonical_nan_bits(dtype, s[0] == '-');
      } else if (dtype == DType::f64) {
        double v;
        if (!to_float(s, v)) bad("malformed or out-of-range number");
        std::memcpy(&bits, &v, 8);
      } else {
        float v;
        if (!to_float(s, v)) bad("malformed or out-of-range number");
        bits = dtype == DType::f32 ? float_bits(v) : dtype == DType::f16 ? Half(v).bits : BFloat16(v).bits;
      }
      std::memcpy(out, &bits, size);
      return;
    }
    int64_t v = 0;
    if (dtype == DType::boolean && (s == "true" || s == "false")) {
      v = s == "true";
    } else if (t.kind != Tok::number || !to_number(s, v)) {
      bad("malformed or out-of-range integer");
    }
    int64_t lo = 0, hi = 0;
    switch (dtype) {
      case DType::i64: lo = INT64_MIN, hi = INT64_MAX; break;
      case DType::i32: lo = INT32_MIN, hi = INT32_MAX; break;
      case DType::i16: lo = INT16_MIN, hi = INT16_MAX; break;
      case DType::i8: lo = INT8_MIN, hi = INT8_MAX; break;
      default: lo = 0, hi = 255; break;  // u8 and bool bytes
    }
    if (v < lo || v > hi) bad("out-of-range value");
    std::memcpy(out, &v, size);  // little-endian: the low bytes
  }

  std::vector<uint8_t> parse_literal_data(const Token& name, const TensorType& type) {
    int64_t n = type.numel();
    if (n > kMaxParsedLiteralElements)
      fail_at(name, "literal ", value_ref(name.text), " has ", n, " elements; at most ", kMaxParsedLiteralElements,
              " are allowed in IR text");
    size_t size = dtype_size(type.dtype);
    std::vector<uint8_t> bytes;
    bytes.reserve(std::min<size_t>(static_cast<size_t>(n) * size, 4096));
    expect("[", "before the literal's elements");
    int64_t count = 0;
    if (is(peek(), "]")) {
      next();
    } else {
      for (;;) {
        const Token& t = next();
        if (count == n)
          fail_at(t, "literal ", value_ref(name.text), " has more elements than its type ", to_string(type), " holds (",
                  n, ")");
        bytes.resize(bytes.size() + size);
        parse_element(t, type.dtype, bytes.data() + bytes.size() - size);
        ++count;
        const Token& sep = next();
        if (is(sep, "]")) break;
        if (!is(sep, ",")) fail_at(sep, "expected ',' or ']' in the literal's elements, got ", describe(sep));
      }
    }
    if (count != n)
      fail_at(name, "literal ", value_ref(name.text), " has ", count, " elements but its type ", to_string(type),
              " needs ", n);
    return bytes;
  }

  AttrValue parse_attr_value() {
    const Token& t = next();
    if (t.kind == Tok::string) return t.text;
    if (is(t, "[")) return parse_int_list("]", "integer", false, size_t{1} << 20);
    if (t.kind == Tok::ident) {
      if (t.text == "true" || t.text == "false") return t.text == "true";
      if (t.text == "inf") return std::numeric_limits<double>::infinity();
      if (t.text == "nan") return std::numeric_limits<double>::quiet_NaN();
      if (std::optional<DType> d = parse_dtype(t.text)) return *d;
      fail_at(t, "expected an attribute value (number, bool, string, [ints] or dtype), got ", describe(t));
    }
    if (t.kind != Tok::number)
      fail_at(t, "expected an attribute value (number, bool, string, [ints] or dtype), got ", describe(t));
    bool is_float = t.text.find_first_of(".eEn") != std::string::npos;
    if (!is_float) return parse_int(t, "an integer attribute");
    double v;
    if (!to_float(t.text, v)) fail_at(t, "malformed or out-of-range float '", t.text, "'");
    return v;
  }

  Attrs parse_attrs() {
    Attrs attrs;
    next();  // '{'
    if (is(peek(), "}")) {
      next();
      return attrs;
    }
    for (;;) {
      const Token& key = next();
      if (key.kind != Tok::ident && key.kind != Tok::string)
        fail_at(key, "expected an attribute name, got ", describe(key));
      if (attrs.has(key.text)) fail_at(key, "attribute '", key.text, "' is given twice");
      expect("=", "after the attribute name");
      attrs.set(key.text, parse_attr_value());
      const Token& sep = next();
      if (is(sep, "}")) return attrs;
      if (!is(sep, ",")) fail_at(sep, "expected ',' or '}' after an attribute, got ", describe(sep));
    }
  }

  // Statement: [%a, %b =] op(%x, ...) [{attrs}] [: types] [@name] [{ body }]
  void parse_node(Graph& g, Scope& scope, int depth) {
    std::vector<const Token*> outs;
    if (peek().kind == Tok::value) {
      for (;;) {
        const Token& o = next();
        check_fresh(scope, o);
        for (const Token* prev : outs)
          if (prev->text == o.text) fail_at(o, "value ", value_ref(o.text), " is defined twice");
        outs.push_back(&o);
        const Token& sep = next();
        if (is(sep, "=")) break;
        if (!is(sep, ",")) fail_at(sep, "expected ',' or '=' after the node's outputs, got ", describe(sep));
        if (peek().kind != Tok::value) fail_at(peek(), "expected an output value, got ", describe(peek()));
      }
    }
    const Token& op_tok = expect_kind(Tok::ident, "an op name");
    const OpDef* op = find_op(op_tok.text);
    if (op == nullptr) fail_at(op_tok, "unknown op '", op_tok.text, "'");
    expect("(", "after the op name");
    std::vector<Value*> inputs;
    if (is(peek(), ")")) {
      next();
    } else {
      for (;;) {
        const Token& v = expect_kind(Tok::value, "an input value like %x");
        inputs.push_back(use(scope, v));
        const Token& sep = next();
        if (is(sep, ")")) break;
        if (!is(sep, ",")) fail_at(sep, "expected ',' or ')' after a node input, got ", describe(sep));
      }
    }
    Attrs attrs;
    if (is(peek(), "{") && (is(peek(1), "}") || ((peek(1).kind == Tok::ident || peek(1).kind == Tok::string) &&
                                                  is(peek(2), "="))))
      attrs = parse_attrs();
    std::vector<TensorType> types;
    if (!outs.empty()) {
      const Token& colon = expect(":", "before the node's output types");
      for (;;) {
        types.push_back(parse_type());
        if (!is(peek(), ",")) break;
        next();
      }
      if (types.size() != outs.size())
        fail_at(colon, "node defines ", outs.size(), " outputs but gives ", types.size(), " types");
    }
    std::string name;
    if (peek().kind == Tok::node_name) name = next().text;
    std::vector<std::string> names;
    for (const Token* o : outs) names.push_back(o->text);
    // Attributes the op gives a default may be left out (text and saved programs written before the
    // attribute existed); they are filled in here, so the graph holds them all. Checking the others
    // is the verifier's job.
    for (const AttrSpec& spec : op->attrs)
      if (spec.default_value.has_value() && attrs.find(spec.name) == nullptr) attrs.set(spec.name, *spec.default_value);
    Node* node = at(op_tok, [&] {
      return g.add_node_typed(*op, std::move(inputs), std::move(attrs), std::move(types), std::move(names), name);
    });
    for (size_t i = 0; i < outs.size(); ++i) define(scope, *outs[i], node->outputs[i]);
    if (is(peek(), "{")) {
      const Token& brace = next();
      if (depth + 1 > kMaxParsedBodyDepth) fail_at(brace, "bodies nested deeper than ", kMaxParsedBodyDepth);
      auto body = std::make_shared<Graph>();
      parse_block(*body, depth + 1);
      node->body = std::move(body);
    }
  }

  void parse_declaration(Graph& g, Scope& scope, const std::string& kind) {
    next();  // input / weight / literal
    const Token& name = expect_kind(Tok::value, "a value name like %x");
    check_fresh(scope, name);
    expect(":", "after the value name");
    TensorType type = parse_type();
    Value* v = nullptr;
    if (kind == "input") {
      v = at(name, [&] { return g.add_input(name.text, type); });
    } else if (kind == "weight") {
      expect("=", "before the weight key");
      const Token& key = expect_kind(Tok::string, "the weight key as a quoted string");
      v = at(name, [&] { return g.add_weight(name.text, type, key.text); });
    } else {
      if (!type.is_contiguous() || type.strides != contiguous_strides(type.dims))
        fail_at(name, "literal ", value_ref(name.text), " must be contiguous, got type ", to_string(type));
      expect("=", "before the literal's elements");
      std::vector<uint8_t> bytes = parse_literal_data(name, type);
      v = at(name, [&] { return g.add_literal(name.text, type, std::move(bytes)); });
    }
    define(scope, name, v);
  }

  // After '{': statements up to 'return ...' and the closing '}'.
  void parse_block(Graph& g, int depth) {
    Scope scope;
    for (;;) {
      const Token& t = peek();
      if (t.kind == Tok::ident && (t.text == "input" || t.text == "weight" || t.text == "literal")) {
        parse_declaration(g, scope, t.text);
      } else if (t.kind == Tok::ident && t.text == "return") {
        next();
        std::vector<Value*> outs;
        if (peek().kind == Tok::value) {
          for (;;) {
            outs.push_back(use(scope, next()));
            if (!is(peek(), ",")) break;
            next();
            if (peek().kind != Tok::value)
              fail_at(peek(), "expected a value after ',' in return, got ", describe(peek()));
          }
        }
        g.set_outputs(std::move(outs));
        expect("}", "after 'return' (return ends a graph)");
        return;
      } else if (t.kind == Tok::value || t.kind == Tok::ident) {
        parse_node(g, scope, depth);
      } else if (t.kind == Tok::end) {
        fail_at(t, "unexpected end of input: a graph needs 'return' and a closing '}'");
      } else if (is(t, "}")) {
        fail_at(t, "expected 'return' before '}'");
      } else {
        fail_at(t, "expected a statement (input, weight, literal, a node or return), got ", describe(t));
      }
    }
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
};

}  // namespace

std::unique_ptr<Graph> parse_graph(std::string_view text) {
  Lexer lexer(text);
  Parser parser(lexer.run());
  return parser.parse();
}

}  // namespace kiln
