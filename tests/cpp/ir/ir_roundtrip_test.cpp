// Round trips of the IR text form: parse(print(g)) is structurally equal to g
// and prints the same text, for every value kind, strided types, every attr
// kind, multi-output nodes, nested fused bodies and literals of every dtype
// (every f16/bf16 bit pattern, NaN payloads, -0.0, infinities, integer extremes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "graph_diff.h"
#include "ir/literal.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/op_def.h"
#include "support/error.h"
#include "support/half.h"

namespace kiln {
namespace {

using testing::graph_diff;

// Checks both round-trip properties and returns the printed text.
std::string expect_round_trip(const Graph& g) {
  std::string text = print_graph(g);
  std::unique_ptr<Graph> parsed;
  try {
    parsed = parse_graph(text);
  } catch (const Error& e) {
    ADD_FAILURE() << "parse failed: " << e.what() << "\n" << text;
    return text;
  }
  EXPECT_EQ(graph_diff(g, *parsed), "") << text;
  EXPECT_EQ(print_graph(*parsed), text);
  return text;
}

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& xs) {
  std::vector<uint8_t> out(xs.size() * sizeof(T));
  if (!xs.empty()) std::memcpy(out.data(), xs.data(), out.size());
  return out;
}

TEST(IrRoundTrip, EveryValueKindAndStridedTypes) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {2, 3}));
  Value* t = g.add_input("t", TensorType(DType::f32, {2, 3}, {1, 2}));   // transposed layout
  Value* s = g.add_input("s", TensorType(DType::f32, {}));                // rank 0
  g.add_input("empty", TensorType(DType::i64, {0, 3}));                   // zero-size dim
  g.add_input("bcast", TensorType(DType::f32, {4, 3}, {0, 1}));           // stride 0
  Value* w = g.add_weight("w", TensorType(DType::f32, {2, 3}), "layer.0.weight");
  g.add_weight("w2", TensorType(DType::bf16, {3, 2}, {1, 3}), "odd \"key\" \\ with\nnewline\ttab\x01 and \xc3\xa9");
  Value* c = g.add_literal("c", TensorType(DType::f32, {}), bytes_of(std::vector<float>{1.5f}));
  Value* a = g.add_node(get_op("add"), {x, t}, {}, "a")->outputs[0];
  Value* m = g.add_node(get_op("mul"), {a, c})->outputs[0];  // generated name
  Value* b = g.add_node(get_op("gt"), {m, s}, {}, "b")->outputs[0];
  Value* r = g.add_node(get_op("where"), {b, m, w}, {}, "r")->outputs[0];
  g.set_outputs({r, a, x});  // outputs may repeat kinds and include inputs
  std::string text = expect_round_trip(g);
  EXPECT_NE(text.find("input %t : f32[2,3]{1,2}\n"), std::string::npos) << text;
  EXPECT_NE(text.find("input %s : f32[]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("weight %w : f32[2,3] = \"layer.0.weight\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\"odd \\\"key\\\" \\\\ with\\nnewline\\ttab\\x01 and \xc3\xa9\""), std::string::npos) << text;
  EXPECT_NE(text.find("literal %c : f32[] = [1.5]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("%r = where(%b, %" + m->name + ", %w) : f32[2,3]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("return %r, %a, %x\n"), std::string::npos) << text;
  verify_graph(*parse_graph(text));
}

TEST(IrRoundTrip, OddValueNamesAndNodeNames) {
  Graph g;
  Value* x = g.add_input("x.1", TensorType(DType::f32, {2}));
  Value* y = g.add_input("with space", TensorType(DType::f32, {2}));
  Value* q = g.add_input("quote\"and\\", TensorType(DType::f32, {2}));
  Node* n = g.add_node_typed(get_op("add"), {x, y}, {}, {TensorType(DType::f32, {2})}, {"0"}, "node name differs");
  Node* k = g.add_node_typed(get_op("sub"), {n->outputs[0], q}, {}, {TensorType(DType::f32, {2})}, {"%weird"},
                             "%weird");
  g.set_outputs({k->outputs[0], n->outputs[0]});
  std::string text = expect_round_trip(g);
  EXPECT_NE(text.find("%0 = add(%x.1, %\"with space\") : f32[2] @\"node name differs\"\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("%\"%weird\" = sub(%0, %\"quote\\\"and\\\\\") : f32[2]\n"), std::string::npos) << text;
}

TEST(IrRoundTrip, EveryAttrKind) {
  // The printer and parser do not check attrs against op specs (the verifier
  // does), so one node can carry every kind.
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {2}));
  Attrs attrs;
  attrs.set("i", int64_t{-7});
  attrs.set("imax", std::numeric_limits<int64_t>::max());
  attrs.set("imin", std::numeric_limits<int64_t>::min());
  attrs.set("f", 2.0);
  attrs.set("f_tenth", 0.1);
  attrs.set("f_negzero", -0.0);
  attrs.set("f_big", 1e300);
  attrs.set("f_denorm", 5e-324);
  attrs.set("f_inf", std::numeric_limits<double>::infinity());
  attrs.set("f_ninf", -std::numeric_limits<double>::infinity());
  attrs.set("f_nan", std::numeric_limits<double>::quiet_NaN());
  attrs.set("b_true", true);
  attrs.set("b_false", false);
  attrs.set("s", std::string("a \"quoted\" \\ string\nwith\ttabs"));
  attrs.set("s_empty", std::string());
  attrs.set("ints", std::vector<int64_t>{1, -2, std::numeric_limits<int64_t>::min()});
  attrs.set("ints_empty", std::vector<int64_t>{});
  attrs.set("weird name", int64_t{1});
  attrs.set("1starts_with_digit", int64_t{2});
  attrs.set(".dot", int64_t{3});
  for (DType d : kAllDTypes) attrs.set(std::string("dt_") + std::string(dtype_name(d)), d);
  Node* n = g.add_node_typed(get_op("relu"), {x}, attrs, {TensorType(DType::f32, {2})}, {"y"});
  g.set_outputs({n->outputs[0]});
  std::string text = expect_round_trip(g);
  EXPECT_NE(text.find("f=2.0,"), std::string::npos) << text;
  EXPECT_NE(text.find("i=-7,"), std::string::npos) << text;
  EXPECT_NE(text.find("ints=[1,-2,-9223372036854775808]"), std::string::npos) << text;
  EXPECT_NE(text.find("dt_bool=bool"), std::string::npos) << text;
  EXPECT_NE(text.find("\"weird name\"=1"), std::string::npos) << text;
  std::unique_ptr<Graph> parsed = parse_graph(text);
  const Attrs& back = parsed->nodes()[0]->attrs;
  EXPECT_EQ(attr_kind(*back.find("f")), AttrKind::float_);  // 2.0 stays a float
  EXPECT_EQ(attr_kind(*back.find("i")), AttrKind::int_);
  EXPECT_TRUE(std::signbit(back.get_float("f_negzero")));
  EXPECT_TRUE(std::isnan(back.get_float("f_nan")));
  EXPECT_EQ(back.get_dtype("dt_bf16"), DType::bf16);
}

TEST(IrRoundTrip, MultiOutputNodes) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {1, 1, 4, 4}));
  Attrs attrs;
  attrs.set("kernel_size", std::vector<int64_t>{2, 2});
  Node* pool = g.add_node(get_op("max_pool2d"), {x}, attrs, "vals");
  ASSERT_EQ(pool->outputs.size(), 2u);
  g.set_outputs({pool->outputs[1], pool->outputs[0]});
  std::string text = expect_round_trip(g);
  EXPECT_NE(text.find("%vals, %" + pool->outputs[1]->name + " = max_pool2d(%x) {"), std::string::npos) << text;
  EXPECT_NE(text.find(" : f32[1,1,2,2], i64[1,1,2,2]\n"), std::string::npos) << text;
  verify_graph(*parse_graph(text));
}

// A fused group computing relu(a * b) + b and a * b, with a scalar body literal
// and a nested group inside.
std::shared_ptr<Graph> make_body(const TensorType& t, bool nested) {
  auto body = std::make_shared<Graph>();
  Value* a = body->add_input("a", t);
  Value* b = body->add_input("b", t);
  Value* k = body->add_literal("k", TensorType(t.dtype, {}), bytes_of(std::vector<float>{0.25f}));
  Value* p = body->add_node(get_op("mul"), {a, b}, {}, "p")->outputs[0];
  Value* q = body->add_node(get_op("mul"), {p, k}, {}, "q")->outputs[0];
  Value* r = nullptr;
  if (nested) {
    Node* inner = body->add_node_typed(get_op("fused"), {q, b}, {}, {t, t}, {"r", "r2"});
    inner->body = make_body(t, false);
    r = inner->outputs[0];
  } else {
    r = body->add_node(get_op("relu"), {q}, {}, "r")->outputs[0];
  }
  Value* s = body->add_node(get_op("add"), {r, b}, {}, "s")->outputs[0];
  body->set_outputs({s, p});
  return body;
}

TEST(IrRoundTrip, NestedFusedBodies) {
  Graph g;
  TensorType t(DType::f32, {2, 4});
  Value* x = g.add_input("x", t);
  Value* y = g.add_input("y", t);
  Node* f = g.add_node_typed(get_op("fused"), {x, y}, {}, {t, t}, {"f", "f_1"});
  f->body = make_body(t, true);
  Value* z = g.add_node(get_op("sub"), {f->outputs[0], f->outputs[1]}, {}, "z")->outputs[0];
  g.set_outputs({z});
  verify_graph(g);
  std::string text = expect_round_trip(g);
  EXPECT_NE(text.find("  %f, %f_1 = fused(%x, %y) : f32[2,4], f32[2,4] {\n    input %a : f32[2,4]\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("      %r = relu(%q) : f32[2,4]\n"), std::string::npos) << text;  // depth 2 body
  EXPECT_NE(text.find("    return %s, %p\n  }\n"), std::string::npos) << text;
  verify_graph(*parse_graph(text));
}

TEST(IrRoundTrip, NodeWithoutOutputsKeepsItsName) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {2}));
  Node* n = g.add_node_typed(get_op("fused"), {x}, {}, {}, {}, "sink");
  n->body = std::make_shared<Graph>();
  n->body->add_input("a", TensorType(DType::f32, {2}));
  g.set_outputs({});
  std::string text = expect_round_trip(g);
  EXPECT_NE(text.find("  fused(%x) @sink {\n    input %a : f32[2]\n    return\n  }\n  return\n"), std::string::npos)
      << text;
}

TEST(IrRoundTrip, FloatLiteralsAreBitExact) {
  Graph g;
  float f32_nan_payload = bits_float(0x7f800001u);  // signalling NaN with a payload
  std::vector<float> f32 = {0.0f, -0.0f, 0.1f, -1.5f, 3.0f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(), f32_nan_payload,
                            std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::lowest(), std::numeric_limits<float>::min(), 16777217.0f};
  uint64_t f64_payload_bits = 0xfff0000000000123ull;
  double f64_payload;
  std::memcpy(&f64_payload, &f64_payload_bits, 8);
  std::vector<double> f64 = {0.0, -0.0, 0.1, 1.0 / 3.0, 1e300, std::numeric_limits<double>::denorm_min(),
                             std::numeric_limits<double>::max(), std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN(), f64_payload, 9007199254740993.0};
  g.add_literal("f32", TensorType(DType::f32, {static_cast<int64_t>(f32.size())}), bytes_of(f32));
  g.add_literal("f64", TensorType(DType::f64, {static_cast<int64_t>(f64.size())}), bytes_of(f64));
  // Every 16-bit pattern, for both 16-bit float formats.
  std::vector<uint16_t> all16(65536);
  for (size_t i = 0; i < all16.size(); ++i) all16[i] = static_cast<uint16_t>(i);
  g.add_literal("f16", TensorType(DType::f16, {256, 256}), bytes_of(all16));
  g.add_literal("bf16", TensorType(DType::bf16, {65536}), bytes_of(all16));
  g.set_outputs({});
  std::string text = expect_round_trip(g);
  EXPECT_NE(text.find("= [0.0, -0.0, 0.1, -1.5, 3.0, inf, -inf, nan, -nan, 0x7f800001, 1e-45,"), std::string::npos)
      << text.substr(0, 400);
  EXPECT_NE(text.find("0xfff0000000000123"), std::string::npos);
  std::unique_ptr<Graph> back = parse_graph(text);
  const Value* h = back->find_value("f16");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->literal_data, bytes_of(all16));
  // 0x3c00 is 1.0 in f16 and 0x3f80 is 1.0 in bf16: both print as their float value.
  EXPECT_EQ(literal_element_to_string(reinterpret_cast<const uint8_t*>(&all16[0x3c00]), DType::f16), "1.0");
  EXPECT_EQ(literal_element_to_string(reinterpret_cast<const uint8_t*>(&all16[0x3f80]), DType::bf16), "1.0");
  EXPECT_EQ(literal_element_to_string(reinterpret_cast<const uint8_t*>(&all16[0x0001]), DType::f16),
            "5.9604645e-08");  // smallest f16 subnormal 2^-24, as the shortest f32 text
}

TEST(IrRoundTrip, IntegerAndBoolLiteralsAreExact) {
  Graph g;
  std::vector<int64_t> i64 = {0, -1, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                              9007199254740993};  // 2^53 + 1: not a double
  std::vector<int32_t> i32 = {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), 0};
  std::vector<int16_t> i16 = {-32768, 32767};
  std::vector<int8_t> i8 = {-128, 127, 0};
  std::vector<uint8_t> u8 = {0, 255, 7};
  std::vector<uint8_t> b = {1, 0, 1, 1};
  g.add_literal("i64", TensorType(DType::i64, {5}), bytes_of(i64));
  g.add_literal("i32", TensorType(DType::i32, {3}), bytes_of(i32));
  g.add_literal("i16", TensorType(DType::i16, {2}), bytes_of(i16));
  g.add_literal("i8", TensorType(DType::i8, {3}), bytes_of(i8));
  g.add_literal("u8", TensorType(DType::u8, {3}), bytes_of(u8));
  g.add_literal("b", TensorType(DType::boolean, {2, 2}), bytes_of(b));
  g.add_literal("zero", TensorType(DType::f32, {0, 5}), {});
  g.set_outputs({});
  std::string text = expect_round_trip(g);
  EXPECT_NE(text.find("literal %i64 : i64[5] = [0, -1, -9223372036854775808, 9223372036854775807, 9007199254740993]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("literal %u8 : u8[3] = [0, 255, 7]"), std::string::npos) << text;
  EXPECT_NE(text.find("literal %b : bool[2,2] = [true, false, true, true]"), std::string::npos) << text;
  EXPECT_NE(text.find("literal %zero : f32[0,5] = []"), std::string::npos) << text;
  verify_graph(*parse_graph(text));
}

TEST(IrRoundTrip, HandWrittenTextWithCommentsParses) {
  const char* text = R"(# a comment before the graph
graph {
  input %x : f32[2,3]
  input %t : f32[3,2]{1,3}   # a transposed input
  weight %w : f32[2,3] = "layer.weight"
  literal %c : f32[] = [1.5]
  literal %h : f16[2] = [0.1, 65504]   # rounded to f16 through f32
  %y = mul(%x, %c) : f32[2,3]
  %z = add(%y, %w) : f32[2,3]
  %u = permute(%t) {dims=[1,0]} : f32[2,3]   # transposing a transposed input: contiguous
  %p = permute(%x) {dims=[1,0]} : f32[3,2]
  return %z, %p, %u
}
)";
  std::unique_ptr<Graph> g = parse_graph(text);
  ASSERT_EQ(g->inputs().size(), 2u);
  EXPECT_EQ(g->inputs()[1]->type.strides, (Dims{1, 3}));
  EXPECT_EQ(g->weights()[0]->weight_key, "layer.weight");
  EXPECT_EQ(load_scalar(g->literals()[0]->literal_data.data(), DType::f32), 1.5);
  EXPECT_EQ(load_scalar(g->literals()[1]->literal_data.data(), DType::f16), static_cast<float>(Half(0.1f)));
  EXPECT_EQ(load_scalar(g->literals()[1]->literal_data.data() + 2, DType::f16), 65504.0);
  ASSERT_EQ(g->num_nodes(), 4u);
  EXPECT_EQ(g->nodes()[2]->attrs.get_ints("dims"), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(g->outputs()[0]->name, "z");
  EXPECT_EQ(g->find_value("x")->users.size(), 2u);  // mul and permute
  // A view's output is strided: the verifier insists the text says so.
  try {
    verify_graph(*g);
    ADD_FAILURE() << "a view output without its strides verified";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'p' (permute): output 0 (%p) has type f32[3,2] but permute infers "
                                         "f32[3,2]{1,3}"),
              std::string::npos)
        << e.what();
  }
  std::string fixed = text;
  fixed.replace(fixed.find("{dims=[1,0]} : f32[3,2]"), 23, "{dims=[1,0]} : f32[3,2]{1,3}");
  std::unique_ptr<Graph> ok = parse_graph(fixed);
  verify_graph(*ok);
  EXPECT_EQ(graph_diff(*ok, *parse_graph(print_graph(*ok))), "");
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// The example in docs/ir.md is real: it parses, verifies and round-trips.
TEST(IrRoundTrip, DocumentedExampleParses) {
  std::ifstream in(std::string(KILN_TEST_IR_DIR) + "/../../docs/ir.md");
  ASSERT_TRUE(in.good());
  std::stringstream all;
  all << in.rdbuf();
  std::string doc = all.str();
  size_t start = doc.find("```\ngraph {");
  ASSERT_NE(start, std::string::npos);
  start += 4;
  size_t end = doc.find("```", start);
  std::string text = doc.substr(start, end - start);
  std::unique_ptr<Graph> g = parse_graph(text);
  verify_graph(*g);
  EXPECT_EQ(g->nodes().back()->name, "f");
  expect_round_trip(*g);
}

}  // namespace
}  // namespace kiln
