// Pass behaviour that IR text files do not show well: fold_literals' size
// cap and its views of non-contiguous slices, the environment defaults of
// PipelineOptions, and graph outputs that fold into literals keep their values.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ir/literal.h"
#include "ops/op_def.h"
#include "passes/pass.h"
#include "passes/passes.h"

namespace kiln {
namespace {

std::unique_ptr<Graph> literal_sum(int64_t n) {
  auto g = std::make_unique<Graph>();
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * 4);
  for (int64_t i = 0; i < n; ++i) store_scalar(bytes.data() + i * 4, DType::f32, static_cast<double>(i));
  Value* a = g->add_literal("a", TensorType(DType::f32, {n}), std::move(bytes));
  Value* s = g->add_node(get_op("add"), {a, a}, {}, "s")->outputs[0];
  g->set_outputs({s});
  return g;
}

TEST(FoldLiterals, RespectsTheSizeCap) {
  auto g = literal_sum(4);  // 16 bytes
  FoldOptions small;
  small.max_bytes = 15;
  EXPECT_FALSE(fold_literals(*g, small));
  EXPECT_EQ(g->num_nodes(), 1u);
  small.max_bytes = 16;
  EXPECT_TRUE(fold_literals(*g, small));
  EXPECT_EQ(g->num_nodes(), 0u);
  ASSERT_EQ(g->outputs()[0]->kind, ValueKind::literal);
  EXPECT_EQ(g->outputs()[0]->name, "s");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(load_scalar(g->outputs()[0]->literal_data.data() + i * 4, DType::f32), 2.0 * i);

  auto big = literal_sum((int64_t{1} << 18) + 1);  // 1 MiB + 4 bytes
  EXPECT_FALSE(fold_literals(*big));
  auto fits = literal_sum(int64_t{1} << 18);  // exactly 1 MiB
  EXPECT_TRUE(fold_literals(*fits));
}

TEST(FoldLiterals, NeverFoldsWeights) {
  Graph g;
  Value* w = g.add_weight("w", TensorType(DType::f32, {2}), "w");
  Value* c = g.add_scalar(2.0, DType::f32);
  Value* y = g.add_node(get_op("mul"), {w, c})->outputs[0];
  g.set_outputs({y});
  EXPECT_FALSE(fold_literals(g));
  EXPECT_EQ(g.num_nodes(), 1u);
}

// p = arange(32) as [4, 8], and s = p[:, :5] (strides [8, 1]: not contiguous), the shape of a mask padded
// for an attention kernel and sliced back.
Value* padded_then_sliced(Graph& g) {
  std::vector<uint8_t> bytes(32 * 4);
  for (int i = 0; i < 32; ++i) store_scalar(bytes.data() + i * 4, DType::f32, i);
  Value* p = g.add_literal("p", TensorType(DType::f32, {4, 8}), std::move(bytes));
  Attrs slice;
  slice.set("dim", int64_t{1});
  slice.set("start", int64_t{0});
  slice.set("end", int64_t{5});
  slice.set("step", int64_t{1});
  return g.add_node(get_op("slice"), {p}, slice, "s")->outputs[0];
}

TEST(FoldLiterals, ViewsOfAFoldedSliceReadTheLiteral) {
  Graph g;
  Value* s = padded_then_sliced(g);
  Attrs perm;
  perm.set("dims", std::vector<int64_t>{1, 0});
  Value* t = g.add_node(get_op("permute"), {s}, perm, "t")->outputs[0];
  g.set_outputs({t});
  EXPECT_TRUE(fold_literals(g));  // the rebuilt permute folds in the same run
  EXPECT_EQ(g.num_nodes(), 0u);
  const Value* out = g.outputs()[0];
  ASSERT_EQ(out->kind, ValueKind::literal);
  ASSERT_EQ(out->type.dims, (Dims{5, 4}));
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 4; ++c)
      EXPECT_EQ(load_scalar(out->literal_data.data() + (r * 4 + c) * 4, DType::f32), c * 8 + r) << r << "," << c;
}

TEST(FoldLiterals, AViewLeftUnfoldedTakesTheLiteralsStrides) {
  Graph g;
  Value* s = padded_then_sliced(g);
  Attrs shape;
  shape.set("shape", std::vector<int64_t>{3, 4, 5});
  Value* e = g.add_node(get_op("expand"), {s}, shape, "e")->outputs[0];
  g.set_outputs({e});
  FoldOptions small;
  small.max_bytes = 80;  // s folds (80 bytes), the expand (240) stays
  EXPECT_TRUE(fold_literals(g, small));
  ASSERT_EQ(g.num_nodes(), 1u);
  const Node* expand = g.nodes()[0];
  EXPECT_EQ(expand->inputs[0]->kind, ValueKind::literal);
  EXPECT_EQ(expand->outputs[0]->type.strides, (Dims{0, 5, 1}));  // was {0, 8, 1}: the padded rows
  EXPECT_EQ(g.outputs()[0], expand->outputs[0]);
}

TEST(PipelineOptions, DefaultsComeFromTheEnvironment) {
  setenv("KILN_DUMP_IR", "cse", 1);
  setenv("KILN_VERIFY_PASSES", "0", 1);
  PipelineOptions a;
  EXPECT_EQ(a.dump_ir, "cse");
  EXPECT_FALSE(a.verify);
  setenv("KILN_VERIFY_PASSES", "1", 1);
  unsetenv("KILN_DUMP_IR");
  PipelineOptions b;
  EXPECT_EQ(b.dump_ir, "");
  EXPECT_TRUE(b.verify);
  unsetenv("KILN_VERIFY_PASSES");
}

}  // namespace
}  // namespace kiln
