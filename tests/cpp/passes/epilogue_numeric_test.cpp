// fuse_epilogues keeps the CPU results bit for bit: every IR test input of the
// pass (tests/ir/fuse_epilogues: biases, activations, matmul and convolution
// residuals, channels-last convolutions) runs before and after the pass on
// random inputs and weights, and the fused ops' CPU kernels must round exactly
// as the unfused graph (backends/cpu/epilogue_kernels.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "interpret.h"
#include "ir/literal.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/passes.h"

namespace kiln {
namespace {

test::Bytes random_bytes(const TensorType& t, std::mt19937& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  test::Bytes bytes(static_cast<size_t>(t.storage_bytes()));
  const size_t size = dtype_size(t.dtype);
  for (size_t off = 0; off + size <= bytes.size(); off += size) store_scalar(bytes.data() + off, t.dtype, normal(rng));
  return bytes;
}

TEST(EpilogueNumeric, FusedGraphsMatchTheUnfusedOnesExactly) {
  namespace fs = std::filesystem;
  int fused_files = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(KILN_TEST_IR_DIR) / "fuse_epilogues")) {
    const std::string path = entry.path().string();
    if (!path.ends_with(".before.txt")) continue;
    SCOPED_TRACE(path);
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    std::unique_ptr<Graph> before = parse_graph(text.str());
    std::unique_ptr<Graph> after = before->clone();
    if (!fuse_epilogues(*after)) continue;
    ++fused_files;
    std::mt19937 rng(7);
    std::vector<test::Bytes> inputs;
    for (const Value* v : before->inputs()) inputs.push_back(random_bytes(v->type, rng));
    std::map<std::string, test::Bytes> weights;
    for (const Value* w : before->weights()) weights[w->weight_key] = random_bytes(w->type, rng);
    const std::vector<test::Bytes> want = test::interpret(*before, inputs, weights);
    const std::vector<test::Bytes> got = test::interpret(*after, inputs, weights);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(want[i] == got[i]) << "output " << i << " differs after the pass\n" << print_graph(*after);
  }
  EXPECT_GE(fused_files, 8) << "too few IR inputs changed by the pass to test anything";
}

}  // namespace
}  // namespace kiln
