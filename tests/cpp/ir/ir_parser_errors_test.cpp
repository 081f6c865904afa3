// Parser errors: malformed text of every kind gives a kiln::Error that names
// the line and column and says what is wrong or what was expected.
#include <gtest/gtest.h>

#include <string>

#include "ir/parser.h"
#include "support/error.h"

namespace kiln {
namespace {

// Parses `text`, expecting a kiln::Error whose message contains every fragment.
void expect_parse_error(const std::string& text, std::initializer_list<std::string> fragments) {
  try {
    parse_graph(text);
    ADD_FAILURE() << "parsed without error:\n" << text;
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const std::string& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "message: " << msg;
  }
}

// A valid graph in which tests replace one line.
std::string graph_with(const std::string& line3) {
  return "graph {\n  input %x : f32[2,3]\n" + line3 + "\n  return %x\n}\n";
}

TEST(IrParserErrors, UnknownOp) {
  expect_parse_error(graph_with("  %y = matmul2(%x, %x) : f32[2,3]"), {"line 3:8:", "unknown op 'matmul2'"});
}

TEST(IrParserErrors, UndefinedValue) {
  expect_parse_error(graph_with("  %y = add(%x, %nope) : f32[2,3]"), {"line 3:16:", "undefined value %nope"});
}

TEST(IrParserErrors, UseBeforeDefinition) {
  expect_parse_error(graph_with("  %y = add(%x, %z) : f32[2,3]\n  %z = relu(%x) : f32[2,3]"),
                     {"line 3:16:", "undefined value %z", "defined before"});
}

TEST(IrParserErrors, Redefinition) {
  expect_parse_error(graph_with("  %x = relu(%x) : f32[2,3]"), {"line 3:3:", "%x is defined twice", "line 2:9"});
  expect_parse_error(graph_with("  %a, %a = max_pool2d(%x) : f32[2], f32[2]"), {"line 3:7:", "%a is defined twice"});
}

TEST(IrParserErrors, BadDtype) {
  expect_parse_error(graph_with("  input %y : f33[2]"), {"line 3:14:", "unknown dtype 'f33'"});
  expect_parse_error(graph_with("  input %y : [2]"), {"line 3:14:", "expected a tensor type"});
}

TEST(IrParserErrors, MalformedNumbers) {
  expect_parse_error(graph_with("  input %y : f32[2,3q]"),
                     {"line 3:20:", "malformed or out-of-range integer '3q' for dim"});
  expect_parse_error(graph_with("  input %y : f32[2,x]"), {"line 3:20:", "expected dim, got 'x'"});
  expect_parse_error(graph_with("  literal %c : f32[1] = [1.5.5]"),
                     {"line 3:26:", "malformed or out-of-range number '1.5.5' for a f32 literal"});
  expect_parse_error(graph_with("  literal %c : f32[1] = [1e39]"), {"line 3:26:", "'1e39'"});
  expect_parse_error(graph_with("  literal %c : i8[1] = [300]"),
                     {"line 3:25:", "out-of-range value '300' for a i8 literal"});
  expect_parse_error(graph_with("  literal %c : i64[1] = [9223372036854775808]"),
                     {"line 3:26:", "malformed or out-of-range integer"});
  expect_parse_error(graph_with("  literal %c : i32[1] = [1.5]"), {"line 3:26:", "integer '1.5'"});
  expect_parse_error(graph_with("  literal %c : f16[1] = [0x12345]"), {"line 3:26:", "malformed hex bits"});
  expect_parse_error(graph_with("  %y = relu(%x) {a=1.2.3} : f32[2,3]"),
                     {"line 3:20:", "malformed or out-of-range float '1.2.3'"});
}

TEST(IrParserErrors, TrailingJunk) {
  expect_parse_error("graph {\n  return\n}\nextra", {"line 4:1:", "unexpected 'extra' after the end of the graph"});
  expect_parse_error("graph {\n  return\n}\n}", {"line 4:1:", "after the end of the graph"});
}

TEST(IrParserErrors, UnbalancedBraces) {
  expect_parse_error("graph {\n  input %x : f32[2]\n  return %x\n", {"line 4:1:", "expected '}' after 'return'"});
  expect_parse_error("graph {\n  input %x : f32[2]\n", {"line 3:1:", "unexpected end of input"});
  expect_parse_error("graph {\n  input %x : f32[2]\n}\n", {"line 3:1:", "expected 'return' before '}'"});
  expect_parse_error(graph_with("  %y = relu(%x) {a=1 : f32[2,3]"), {"line 3:22:", "expected ',' or '}'"});
  expect_parse_error(graph_with("  %y = relu(%x : f32[2,3]"), {"line 3:16:", "expected ',' or ')'"});
  expect_parse_error("graph {\n  input %x : f32[2]\n  %f = fused(%x) : f32[2] {\n    input %a : f32[2]\n"
                     "    return %a\n  return %f\n}\n",
                     {"line 6:3:", "expected '}' after 'return'", "got 'return'"});
}

TEST(IrParserErrors, HugeDims) {
  expect_parse_error(graph_with("  input %y : f32[1000000000,1000000000]"), {"line 3:17:", "too many elements"});
  expect_parse_error(graph_with("  input %y : f32[99999999999999999999]"),
                     {"line 3:18:", "malformed or out-of-range integer"});
  expect_parse_error(graph_with("  input %y : f32[-1,2]"), {"line 3:18:", "dim must not be negative"});
  expect_parse_error(graph_with("  input %y : f32[4,4]{1000000000000000,1}"), {"line 3:22:", "span too many"});
  std::string rank = "  input %y : f32[";
  for (int i = 0; i < 100; ++i) rank += i ? ",1" : "1";
  expect_parse_error(graph_with(rank + "]"), {"line 3:", "too many dims (at most 64)"});
}

TEST(IrParserErrors, LiteralCountsMustMatchType) {
  expect_parse_error(graph_with("  literal %c : f32[3] = [1, 2]"),
                     {"line 3:11:", "literal %c has 2 elements but its type f32[3] needs 3"});
  expect_parse_error(graph_with("  literal %c : f32[1] = [1, 2]"),
                     {"line 3:29:", "more elements than its type f32[1] holds (1)"});
  // 10^12 elements: rejected before anything is allocated.
  expect_parse_error(graph_with("  literal %c : f32[1000000,1000000] = [1]"),
                     {"line 3:11:", "1000000000000 elements; at most 16777216"});
  expect_parse_error(graph_with("  literal %c : f32[2,2]{1,2} = [1, 2, 3, 4]"), {"line 3:11:", "must be contiguous"});
}

TEST(IrParserErrors, StringsAndCharacters) {
  expect_parse_error(graph_with("  weight %w : f32[2] = \"no end"), {"line 3:24:", "unterminated string"});
  expect_parse_error(graph_with("  weight %w : f32[2] = \"bad \\q\""), {"line 3:24:", "bad escape '\\q'"});
  expect_parse_error(graph_with("  weight %w : f32[2] = \"bad \\x4\""), {"line 3:24:", "two hex digits"});
  expect_parse_error(graph_with("  weight %w : f32[2] = name"), {"line 3:24:", "expected the weight key"});
  expect_parse_error(graph_with("  $y = relu(%x) : f32[2,3]"), {"line 3:3:", "unexpected character '$'"});
  expect_parse_error(graph_with("  % = relu(%x) : f32[2,3]"), {"line 3:3:", "expected a name after '%'"});
}

TEST(IrParserErrors, StatementShape) {
  expect_parse_error("grph {\n  return\n}\n", {"line 1:1:", "expected 'graph'"});
  expect_parse_error(graph_with("  %y = relu(%x) : f32[2,3], f32[2,3]"),
                     {"line 3:17:", "node defines 1 outputs but gives 2 types"});
  expect_parse_error(graph_with("  %y = relu(%x)"), {"line 4:3:", "expected ':' before the node's output types"});
  expect_parse_error(graph_with("  %y = relu(%x) {a=1, a=2} : f32[2,3]"), {"line 3:23:", "'a' is given twice"});
  expect_parse_error(graph_with("  %y = relu(%x) {a=what} : f32[2,3]"), {"line 3:20:", "expected an attribute value"});
  expect_parse_error(graph_with("  input %y : f32[2,3]{1}"), {"line 3:22:", "2 dims but 1 strides"});
  expect_parse_error(graph_with("  input y : f32[2]"), {"line 3:9:", "expected a value name like %x, got 'y'"});
  expect_parse_error(graph_with("  = relu(%x)"), {"line 3:3:", "expected a statement"});
  expect_parse_error("graph {\n  return %x\n}\n", {"line 2:10:", "undefined value %x"});
}

TEST(IrParserErrors, BodiesHaveTheirOwnScope) {
  // A body cannot read the enclosing graph's values.
  expect_parse_error("graph {\n  input %x : f32[2]\n  %f = fused(%x) : f32[2] {\n    input %a : f32[2]\n"
                     "    %r = add(%a, %x) : f32[2]\n    return %r\n  }\n  return %f\n}\n",
                     {"line 5:18:", "undefined value %x"});
}

TEST(IrParserErrors, DeepNestingIsRejected) {
  std::string text = "graph {\n input %x : f32[1]\n";
  for (int i = 0; i < 40; ++i) text += " %y = fused(%x) : f32[1] {\n input %x : f32[1]\n";
  expect_parse_error(text, {"bodies nested deeper than 32"});
}

}  // namespace
}  // namespace kiln
