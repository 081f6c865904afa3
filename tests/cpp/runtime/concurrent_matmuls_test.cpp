// find_concurrent_matmuls: which consecutive matrix products may run side by
// side (no product reads another's result, views between them are free), and
// the memory plan keeping everything such a span touches apart.
#include <gtest/gtest.h>

#include "ir/graph.h"
#include "memory/memory_plan.h"
#include "memory/plan_verifier.h"
#include "ops/op_def.h"
#include "runtime/concurrent_matmuls.h"
#include "support/error.h"

namespace kiln {
namespace {

Value* transposed(Graph& g, Value* w) {
  Attrs perm;
  perm.set("dims", std::vector<int64_t>{1, 0});
  return g.add_node(get_op("permute"), {w}, perm)->outputs[0];
}

Value* product(Graph& g, Value* x, const std::string& weight) {
  Value* w = g.add_weight(weight, TensorType(DType::f32, {8, 8}), weight);
  return g.add_node(get_op("matmul"), {x, transposed(g, w)})->outputs[0];
}

// Attention's three projections of one normalized input, as BERT has them, then what reads them.
std::unique_ptr<Graph> projections(int count) {
  auto g = std::make_unique<Graph>();
  Value* x = g->add_input("x", TensorType(DType::f32, {4, 8}));
  Value* h = g->add_node(get_op("tanh"), {x})->outputs[0];
  Value* sum = nullptr;
  std::vector<Value*> outs;
  for (int k = 0; k < count; ++k) outs.push_back(product(*g, h, "w" + std::to_string(k)));
  for (Value* o : outs) sum = sum ? g->add_node(get_op("add"), {sum, o})->outputs[0] : o;
  g->set_outputs({sum});
  return g;
}

int position_of(const Graph& g, const Value* v) {
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i] == v->producer) return static_cast<int>(i);
  return -1;
}

TEST(ConcurrentMatmuls, IndependentProductsOfOneInputFormOneSpan) {
  auto g = projections(3);
  std::vector<ConcurrentSpan> spans = find_concurrent_matmuls(*g, 4);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].branches, 3);
  const auto& nodes = g->nodes();
  EXPECT_EQ(nodes[spans[0].first]->op->name, "matmul");
  EXPECT_EQ(nodes[spans[0].last]->op->name, "matmul");
  int products = 0;
  for (int pos = spans[0].first; pos <= spans[0].last; ++pos) products += nodes[pos]->op->name == "matmul";
  EXPECT_EQ(products, 3);  // the weights' permutes between them are views
}

TEST(ConcurrentMatmuls, AtMostMaxBranchesAndNeverAlone) {
  auto g = projections(5);
  std::vector<ConcurrentSpan> spans = find_concurrent_matmuls(*g, 2);
  ASSERT_EQ(spans.size(), 2u);  // 2 + 2, and the fifth product alone is no span
  EXPECT_EQ(spans[0].branches, 2);
  EXPECT_EQ(spans[1].branches, 2);
  EXPECT_LT(spans[0].last, spans[1].first);
  EXPECT_TRUE(find_concurrent_matmuls(*projections(1), 4).empty());
}

TEST(ConcurrentMatmuls, AProductReadingAnotherEndsTheSpan) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {4, 8}));
  Value* a = product(g, x, "wa");
  Attrs shape;
  shape.set("shape", std::vector<int64_t>{4, 8});
  Value* a_view = g.add_node(get_op("reshape"), {a}, shape)->outputs[0];
  Value* b = product(g, a_view, "wb");  // reads a through a view
  Value* c = product(g, x, "wc");       // independent of b: b and c may run side by side
  g.set_outputs({b, c});
  std::vector<ConcurrentSpan> spans = find_concurrent_matmuls(g, 4);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].first, position_of(g, b));
  EXPECT_EQ(spans[0].last, position_of(g, c));
}

TEST(ConcurrentMatmuls, AnotherComputeNodeBetweenProductsEndsTheSpan) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {4, 8}));
  Value* a = product(g, x, "wa");
  Value* t = g.add_node(get_op("tanh"), {x})->outputs[0];
  Value* b = product(g, x, "wb");
  g.set_outputs({a, t, b});
  EXPECT_TRUE(find_concurrent_matmuls(g, 4).empty());
}

TEST(ConcurrentMatmuls, ThePlanKeepsWhatASpanTouchesApart) {
  // Two products of two inputs: in call order the first input is dead once the first product ran, so the
  // second product's result could take its bytes; side by side it must not.
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {4, 8}));
  Value* h1 = g.add_node(get_op("tanh"), {x})->outputs[0];
  Value* h2 = g.add_node(get_op("sigmoid"), {x})->outputs[0];
  Value* p1 = product(g, h1, "w1");
  Value* p2 = product(g, h2, "w2");
  g.set_outputs({g.add_node(get_op("add"), {p1, p2})->outputs[0]});
  std::vector<ConcurrentSpan> spans = find_concurrent_matmuls(g, 4);
  ASSERT_EQ(spans.size(), 1u);
  ASSERT_EQ(spans[0].first, position_of(g, p1));
  ASSERT_EQ(spans[0].last, position_of(g, p2));

  const MemoryPlan sequential = plan_memory(g);
  EXPECT_LT(sequential.at(h1).last, spans[0].last);  // in call order h1 is free before p2 is written
  PlanOptions options;
  options.concurrent_spans = {{spans[0].first, spans[0].last}};
  const MemoryPlan plan = plan_memory(g, options);
  verify_memory_plan(g, plan);
  const Value* touched[] = {h1, h2, p1, p2};
  for (const Value* v : touched) {
    const ValuePlan& p = plan.at(v);
    ASSERT_EQ(p.storage, Storage::arena) << v->name;
    EXPECT_LE(p.first, spans[0].last) << v->name;
    EXPECT_GE(p.last, spans[0].last) << v->name;  // read or written in the span: live to its end
  }
  EXPECT_LE(plan.at(p2).first, spans[0].first);  // written in the span: reserved from its start
  for (const Value* a : touched)
    for (const Value* b : touched) {
      if (a == b) continue;
      const ValuePlan &pa = plan.at(a), &pb = plan.at(b);
      EXPECT_TRUE(pa.offset + pa.bytes <= pb.offset || pb.offset + pb.bytes <= pa.offset)
          << a->name << " and " << b->name << " share arena bytes";
    }
}

TEST(ConcurrentMatmuls, ASpanOutsideTheGraphIsRefused) {
  auto g = projections(2);
  PlanOptions options;
  options.concurrent_spans = {{0, 99}};
  EXPECT_THROW(plan_memory(*g, options), Error);
}

}  // namespace
}  // namespace kiln
