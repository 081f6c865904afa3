// The verifier: valid graphs pass; each broken invariant gives a kiln::Error
// whose message names the node (and the enclosing fused node for bodies).
#include <gtest/gtest.h>

#include <string>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/op_def.h"
#include "support/error.h"

namespace kiln {
namespace {

void expect_verify_error(const Graph& g, std::initializer_list<std::string> fragments) {
  try {
    verify_graph(g);
    ADD_FAILURE() << "verified without error";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const std::string& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "message: " << msg;
  }
}

// x -> a = add(x, x) -> b = relu(a) -> return b
struct Chain {
  Graph g;
  Value* x;
  Node* a;
  Node* b;
  Chain() {
    x = g.add_input("x", TensorType(DType::f32, {2, 3}));
    a = g.add_node(get_op("add"), {x, x}, {}, "a");
    b = g.add_node(get_op("relu"), {a->outputs[0]}, {}, "b");
    g.set_outputs({b->outputs[0]});
  }
};

TEST(IrVerifier, ValidGraphsPass) {
  Chain c;
  verify_graph(c.g);
  std::unique_ptr<Graph> g = parse_graph(R"(graph {
  input %x : f32[1,2,4,4]
  weight %w : f32[4] = "w"
  literal %one : f32[] = [1.0]
  %v, %i = max_pool2d(%x) {ceil_mode=false, channels_last=false, dilation=[1,1], kernel_size=[2,2], padding=[0,0], stride=[]} : f32[1,2,2,2], i64[1,2,2,2]
  %p = permute(%v) {dims=[0,1,3,2]} : f32[1,2,2,2]{8,4,1,2}
  %f = fused(%p, %one) : f32[1,2,2,2] {
    input %a : f32[1,2,2,2]{8,4,1,2}
    input %b : f32[]
    %s = add(%a, %b) : f32[1,2,2,2]
    return %s
  }
  return %f, %i, %w
}
)");
  verify_graph(*g);
}

TEST(IrVerifier, WrongOutputTypeNamesTheNode) {
  std::unique_ptr<Graph> g = parse_graph(
      "graph {\n  input %x : f32[2,3]\n  %y = add(%x, %x) : f32[2,2]\n  return %y\n}\n");
  expect_verify_error(*g, {"node 'y' (add)", "output 0 (%y) has type f32[2,2] but add infers f32[2,3]"});
  std::unique_ptr<Graph> dt = parse_graph(
      "graph {\n  input %x : f32[2,3]\n  %y = gt(%x, %x) : f32[2,3]\n  return %y\n}\n");
  expect_verify_error(*dt, {"node 'y' (gt)", "but gt infers bool[2,3]"});
  // Strides count: a contiguous claim for a strided view result is wrong.
  std::unique_ptr<Graph> view = parse_graph(
      "graph {\n  input %x : f32[2,3]\n  %t = permute(%x) {dims=[1,0]} : f32[3,2]\n  return %t\n}\n");
  expect_verify_error(*view, {"node 't' (permute)", "f32[3,2] but permute infers f32[3,2]{1,3}"});
}

TEST(IrVerifier, ArityAndAttributeErrorsNameTheNode) {
  std::unique_ptr<Graph> g = parse_graph(
      "graph {\n  input %x : f32[2]\n  %y = add(%x) : f32[2]\n  return %y\n}\n");
  expect_verify_error(*g, {"node 'y' (add)", "expects 2 inputs, got 1"});
  std::unique_ptr<Graph> unknown = parse_graph(
      "graph {\n  input %x : f32[2]\n  %y = relu(%x) {alpha=1} : f32[2]\n  return %y\n}\n");
  expect_verify_error(*unknown, {"node 'y' (relu)", "has no attribute 'alpha'"});
  // A pass must fill in defaults: max_pool2d made with only its required attribute.
  Graph partial;
  Value* x = partial.add_input("x", TensorType(DType::f32, {1, 1, 4, 4}));
  Attrs attrs;
  attrs.set("kernel_size", std::vector<int64_t>{2, 2});
  Node* pool = partial.add_node_typed(get_op("max_pool2d"), {x}, attrs,
                                      {TensorType(DType::f32, {1, 1, 2, 2}), TensorType(DType::i64, {1, 1, 2, 2})},
                                      {"v", "i"}, "v");
  partial.set_outputs({pool->outputs[0]});
  expect_verify_error(partial, {"node 'v' (max_pool2d)", "attribute 'ceil_mode' is missing"});
}

TEST(IrVerifier, ParsedTextGetsDefaultedAttributesFilledIn) {
  // Text (and saved programs) from before an attribute existed still verify.
  std::unique_ptr<Graph> g = parse_graph(
      "graph {\n  input %x : f32[1,1,4,4]\n  %v, %i = max_pool2d(%x) {kernel_size=[2,2]} : f32[1,1,2,2], "
      "i64[1,1,2,2]\n  return %v\n}\n");
  verify_graph(*g);
  EXPECT_NE(print_graph(*g).find("ceil_mode=false"), std::string::npos) << print_graph(*g);
}

TEST(IrVerifier, UseBeforeDefinitionNamesTheNode) {
  Chain c;
  c.g.move_before(c.b, c.a);  // relu now reads a before add defines it
  expect_verify_error(c.g, {"node 'b' (relu)", "input 0 (%a) is used before its definition"});
}

TEST(IrVerifier, CycleIsRejected) {
  Chain c;
  c.g.set_node_input(c.a, 1, c.b->outputs[0]);  // a reads b, b reads a
  expect_verify_error(c.g, {"node 'a' (add)", "input 1 (%b) is used before its definition"});
}

TEST(IrVerifier, DuplicatedNameNamesTheNode) {
  Chain c;
  c.b->outputs[0]->name = "a";  // bypasses Graph's own check
  expect_verify_error(c.g, {"node 'b' (relu)", "value name %a is defined twice"});
  Chain d;
  d.b->name = "a";
  expect_verify_error(d.g, {"two nodes are named 'a'"});
}

TEST(IrVerifier, InconsistentUseListNamesTheNode) {
  Chain c;
  c.b->inputs[0] = c.x;  // edited without Graph::set_node_input
  expect_verify_error(c.g, {"node 'b' (relu)", "uses %x 1 time(s) but the use list of %x has it 0 time(s)"});
  Chain d;
  d.x->users.push_back(d.b);  // a stale extra use
  expect_verify_error(d.g, {"use list of %x names node 'b' (relu) 1 time(s) but the node does not use it"});
  Chain e;
  e.x->users.pop_back();  // add uses x twice, the list keeps one
  expect_verify_error(e.g, {"node 'a' (add) uses %x 2 time(s) but the use list of %x has it 1 time(s)"});
}

TEST(IrVerifier, ValueFromAnotherGraphIsRejected) {
  Chain c;
  Graph other;
  Value* stranger = other.add_input("s", TensorType(DType::f32, {2, 3}));
  c.g.set_node_input(c.b, 0, stranger);
  expect_verify_error(c.g, {"node 'b' (relu)", "input 0 (%s) is not a value of this graph"});
  Chain d;
  d.g.set_outputs({stranger});
  expect_verify_error(d.g, {"graph output 0 (%s) is not a value of this graph"});
}

TEST(IrVerifier, MalformedConstants) {
  Chain c;
  Value* lit = c.g.add_literal("k", TensorType(DType::f32, {2}), std::vector<uint8_t>(8));
  lit->literal_data.resize(7);
  expect_verify_error(c.g, {"literal %k of type f32[2] needs 8 bytes but holds 7"});
  Chain d;
  Value* flag = d.g.add_literal("flag", TensorType(DType::boolean, {}), {2});
  (void)flag;
  expect_verify_error(d.g, {"literal %flag holds 2", "bool must be 0 or 1"});
  Chain e;
  e.g.add_weight("w", TensorType(DType::f32, {2}), "");
  expect_verify_error(e.g, {"weight %w has an empty weight key"});
  Chain f;
  f.x->type.strides = {1};
  expect_verify_error(f.g, {"input %x has 2 dims but 1 strides"});
}

// A fused node over x (f32[2,3]) whose body adds its input to itself.
struct Fused {
  Graph g;
  Node* f;
  Fused() {
    TensorType t(DType::f32, {2, 3});
    Value* x = g.add_input("x", t);
    f = g.add_node_typed(get_op("fused"), {x}, {}, {t}, {"f"});
    auto body = std::make_shared<Graph>();
    Value* a = body->add_input("a", t);
    Value* s = body->add_node(get_op("add"), {a, a}, {}, "s")->outputs[0];
    body->set_outputs({s});
    f->body = body;
    g.set_outputs({f->outputs[0]});
  }
};

TEST(IrVerifier, MismatchedFusedBodyNamesTheNode) {
  Fused ok;
  verify_graph(ok.g);

  Fused in_type;
  in_type.f->body->inputs()[0]->type = TensorType(DType::f32, {3, 2});
  in_type.f->body->nodes()[0]->outputs[0]->type = TensorType(DType::f32, {3, 2});
  expect_verify_error(in_type.g,
                      {"node 'f' (fused): input 0 (%x) has type f32[2,3] but body input %a has type f32[3,2]"});

  Fused out_count;
  out_count.f->body->set_outputs({});
  expect_verify_error(out_count.g, {"node 'f' (fused) has 1 outputs but its body returns 0"});

  Fused out_type;
  out_type.f->outputs[0]->type = TensorType(DType::f16, {2, 3});
  expect_verify_error(out_type.g, {"node 'f' (fused): output 0 (%f) has type f16[2,3] but its body returns f32[2,3]"});

  Fused in_count;
  in_count.f->body->add_input("extra", TensorType(DType::f32, {}));
  expect_verify_error(in_count.g, {"node 'f' (fused) has 1 inputs but its body has 2"});

  Fused no_body;
  no_body.f->body.reset();
  expect_verify_error(no_body.g, {"node 'f' (fused) is a fused group without a body"});
}

TEST(IrVerifier, ErrorsInsideBodiesNameBothNodes) {
  Fused bad;
  bad.f->body->nodes()[0]->outputs[0]->type = TensorType(DType::f32, {2, 2});
  bad.f->outputs[0]->type = TensorType(DType::f32, {2, 2});
  expect_verify_error(bad.g, {"in the body of node 'f' (fused): node 's' (add): output 0 (%s) has type f32[2,2]"});
}

TEST(IrVerifier, BodyOnANonFusedNodeIsRejected) {
  Chain c;
  c.b->body = std::make_shared<Graph>();
  expect_verify_error(c.g, {"node 'b' (relu) has a body but its op is not a fused group"});
}

}  // namespace
}  // namespace kiln
