// split_weight_folds: the fold graphs it returns (the main graphs are checked
// as IR text in tests/ir/split_weight_folds/).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/passes.h"
#include "passes/weight_folds.h"

namespace kiln {
namespace {

TEST(WeightFolds, BatchNormFoldsIntoTwoConstantsReadingTheirSources) {
  auto g = parse_graph(R"(graph {
  input %x : f32[1,2,4,4]
  weight %w : f32[3,2,1,1] = "w"
  weight %mean : f32[3] = "mean"
  weight %var : f32[3] = "var"
  %y = conv2d(%x, %w) {dilation=[1,1], groups=1, padding=[0,0], stride=[1,1]} : f32[1,3,4,4]
  %z = batch_norm(%y, %mean, %var) {eps=0.00001} : f32[1,3,4,4]
  return %z
})");
  ASSERT_TRUE(fold_batch_norm(*g));
  std::vector<FoldedConstant> folds = split_weight_folds(*g);
  verify_graph(*g);
  ASSERT_EQ(folds.size(), 2u);
  EXPECT_EQ(folds[0].key, "fold:0");
  EXPECT_EQ(folds[0].source_keys, (std::vector<std::string>{"w", "var"}));
  EXPECT_EQ(folds[1].key, "fold:1");
  EXPECT_EQ(folds[1].source_keys, (std::vector<std::string>{"mean", "var"}));
  for (const FoldedConstant& f : folds) {
    verify_graph(*f.graph);
    EXPECT_TRUE(f.graph->weights().empty());  // sources are inputs of the fold graph
    EXPECT_EQ(f.graph->outputs().size(), 1u);
  }
  EXPECT_EQ(folds[0].graph->outputs()[0]->type, TensorType(DType::f32, {3, 2, 1, 1}));
  // The main graph: one convolution reading two folded constants, nothing else.
  ASSERT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(g->weights().size(), 2u);
  EXPECT_TRUE(split_weight_folds(*g).empty());
}

TEST(WeightFolds, ViewsOfWeightsAreNeverFolded) {
  auto g = parse_graph(R"(graph {
  input %x : f32[4,8]
  weight %w : f32[16,8] = "w"
  %wt = permute(%w) {dims=[1,0]} : f32[8,16]{1,8}
  %m = matmul(%x, %wt) : f32[4,16]
  return %m
})");
  EXPECT_TRUE(split_weight_folds(*g).empty());
  EXPECT_EQ(g->num_nodes(), 2u);
}

}  // namespace
}  // namespace kiln
