// The fused kernel against the ops run one by one, on random elementwise
// graphs (broadcasting, strided inputs, scalar literals, casts, compares,
// f32/f16, f32/bf16, f64, integers), bit for bit; fusion never breaks the
// topological order (random DAGs with matmuls and reductions mixed in); the
// fused op's and kernel's error paths.
#include <gtest/gtest.h>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/passes.h"
#include "random_graphs.h"

namespace kiln {
namespace {

int count_fused(const Graph& g) {
  int n = 0;
  for (const Node* node : g.nodes()) n += node->op->has(kFusedGroup) ? 1 : 0;
  return n;
}

// Independent of the verifier: every node input is defined before its user.
void expect_topological(const Graph& g) {
  std::set<const Value*> defined(g.inputs().begin(), g.inputs().end());
  defined.insert(g.weights().begin(), g.weights().end());
  defined.insert(g.literals().begin(), g.literals().end());
  for (const Node* n : g.nodes()) {
    for (const Value* v : n->inputs)
      EXPECT_TRUE(defined.count(v)) << "node " << n->name << " reads %" << v->name << " before it is defined";
    defined.insert(n->outputs.begin(), n->outputs.end());
  }
  for (const Value* v : g.outputs()) EXPECT_TRUE(defined.count(v));
}

// Fuses a copy of the graph, checks it, runs both, compares bytes exactly.
int check_fusion(const test::RandomGraph& r, uint32_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + print_graph(*r.graph));
  verify_graph(*r.graph);
  std::unique_ptr<Graph> fused = r.graph->clone();
  fuse_elementwise(*fused);
  verify_graph(*fused);
  expect_topological(*fused);
  EXPECT_FALSE(fuse_elementwise(*fused)) << "not idempotent";
  for (const Node* n : fused->nodes()) {
    if (!n->op->has(kFusedGroup)) continue;
    EXPECT_GE(n->body->num_nodes(), 2u) << "a group of one op was fused";
    for (const Node* m : n->body->nodes()) {
      EXPECT_TRUE(m->op->has(kElementwise) || m->op->name == "cast") << m->op->name << " in a body";
      EXPECT_EQ(m->outputs[0]->type.dims, n->outputs[0]->type.dims);
    }
  }
  std::vector<test::Bytes> want = test::interpret(*r.graph, r.inputs);
  std::vector<test::Bytes> got = test::interpret(*fused, r.inputs);
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    EXPECT_TRUE(got[i] == want[i]) << "output " << i << " differs\n" << print_graph(*fused);
  return count_fused(*fused);
}

TEST(FuseNumeric, RandomGraphsMatchOneByOne) {
  struct Config {
    DType base, narrow;
  };
  const Config configs[] = {{DType::f32, DType::f16}, {DType::f32, DType::bf16}, {DType::f64, DType::f32},
                            {DType::i32, DType::i8}, {DType::i64, DType::u8}};
  for (const Config& c : configs) {
    int fused_groups = 0;
    for (uint32_t seed = 1; seed <= 40; ++seed) {
      test::RandomGraphOptions opt;
      opt.base = c.base;
      opt.narrow = c.narrow;
      opt.num_ops = 6 + static_cast<int>(seed % 10);
      fused_groups += check_fusion(test::random_elementwise_graph(seed, opt), seed);
    }
    EXPECT_GT(fused_groups, 20) << "too few groups formed for " << dtype_name(c.base) << " to test anything";
  }
}

TEST(FuseNumeric, LargeTensorsSplitAcrossThreadsMatch) {
  test::RandomGraphOptions opt;
  opt.dims = {129, 601};  // > one parallel block, odd sizes, not a multiple of the chunk
  opt.num_ops = 10;
  int fused_groups = 0;
  for (uint32_t seed = 100; seed < 104; ++seed) fused_groups += check_fusion(test::random_elementwise_graph(seed, opt), seed);
  EXPECT_GT(fused_groups, 0);
}

TEST(FuseNumeric, RandomDagsWithOtherOpsStayAcyclicAndCorrect) {
  int fused_groups = 0;
  for (uint32_t seed = 1; seed <= 150; ++seed) {
    test::RandomGraphOptions opt;
    opt.dims = {6, 6};
    opt.num_ops = 10 + static_cast<int>(seed % 20);
    opt.mix_in_matmuls = true;
    fused_groups += check_fusion(test::random_elementwise_graph(seed, opt), seed);
  }
  EXPECT_GT(fused_groups, 100);
}

TEST(FusedOp, InferenceRefusesAndPointsAtAddNodeTyped) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {2}));
  try {
    g.add_node(get_op("fused"), {x});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("create it with Graph::add_node_typed"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(get_op("fused").has(kFusedGroup));
  EXPECT_FALSE(get_op("fused").has(kElementwise));
}

TEST(FusedKernel, RejectsBodiesItCannotRun) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {2, 2}));
  auto body = std::make_shared<Graph>();
  Value* bx = body->add_input("x", x->type);
  Value* mm = body->add_node(get_op("matmul"), {bx, bx})->outputs[0];
  body->set_outputs({mm});
  Node* n = g.add_node_typed(get_op("fused"), {x}, Attrs(), {mm->type}, {"y"});
  n->body = body;
  g.set_outputs({n->outputs[0]});
  std::string reason;
  EXPECT_FALSE(cpu::cpu_supports(*n, &reason));
  EXPECT_NE(reason.find("'v0'"), std::string::npos) << reason;
  EXPECT_NE(reason.find("not an elementwise op"), std::string::npos) << reason;

  n->body.reset();
  EXPECT_FALSE(cpu::cpu_supports(*n, &reason));
  EXPECT_NE(reason.find("without a body"), std::string::npos) << reason;
}

TEST(FusedKernel, RejectsBodiesMixingIntegerAndFloat) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {3}));
  auto body = std::make_shared<Graph>();
  Value* bx = body->add_input("x", x->type);
  Attrs to_int;
  to_int.set("dtype", DType::i32);
  Value* c = body->add_node(get_op("cast"), {bx}, to_int)->outputs[0];
  Value* d = body->add_node(get_op("neg"), {c})->outputs[0];
  body->set_outputs({d});
  Node* n = g.add_node_typed(get_op("fused"), {x}, Attrs(), {d->type}, {"y"});
  n->body = body;
  std::string reason;
  EXPECT_FALSE(cpu::cpu_supports(*n, &reason));
  EXPECT_NE(reason.find("mixes integer and floating"), std::string::npos) << reason;
}

}  // namespace
}  // namespace kiln
