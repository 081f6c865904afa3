// The passes keep results: the whole pipeline, and each pass alone, on random
// graphs full of what the passes rewrite (literal-only expressions, twins,
// x*1 and x+0, reshape round trips), against the unoptimized graph run op by
// op. Every pass is idempotent on those graphs and on every IR test input.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/literal.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "passes/passes.h"
#include "random_graphs.h"

namespace kiln {
namespace {

using PassFn = bool (*)(Graph&);
bool fold_default(Graph& g) { return fold_literals(g); }
const std::vector<std::pair<std::string, PassFn>> kPasses = {
    {"dce", dce},
    {"cse", cse},
    {"simplify", simplify},
    {"fold_literals", fold_default},
    {"fuse_elementwise", fuse_elementwise}};

// Values equal (NaN equals NaN; -0 equals +0, since x+0 is simplified away).
void expect_same_values(const Graph& g, const std::vector<test::Bytes>& want, const std::vector<test::Bytes>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    DType d = g.outputs()[i]->type.dtype;
    size_t size = dtype_size(d);
    ASSERT_EQ(want[i].size(), got[i].size());
    int bad = 0;
    for (size_t off = 0; off < want[i].size() && bad < 3; off += size) {
      double a = load_scalar(want[i].data() + off, d), b = load_scalar(got[i].data() + off, d);
      if (a == b || (std::isnan(a) && std::isnan(b))) continue;
      ADD_FAILURE() << "output " << i << " element " << off / size << ": " << b << " instead of " << a;
      ++bad;
    }
  }
}

test::RandomGraph bait_graph(uint32_t seed) {
  test::RandomGraphOptions opt;
  opt.with_rewrite_bait = true;
  opt.num_ops = 8 + static_cast<int>(seed % 12);
  opt.narrow = seed % 2 ? DType::f16 : DType::bf16;
  return test::random_elementwise_graph(seed, opt);
}

TEST(PipelineNumeric, WholePipelineKeepsResults) {
  int removed = 0;
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    test::RandomGraph r = bait_graph(seed);
    SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + print_graph(*r.graph));
    std::unique_ptr<Graph> opt = r.graph->clone();
    PipelineOptions o;
    o.verify = true;
    o.dump_ir.clear();
    run_pipeline(*opt, o);
    removed += static_cast<int>(r.graph->num_nodes()) - static_cast<int>(opt->num_nodes());
    expect_same_values(*opt, test::interpret(*r.graph, r.inputs), test::interpret(*opt, r.inputs));
  }
  EXPECT_GT(removed, 300) << "the pipeline barely changed the graphs: the test would not catch much";
}

TEST(PipelineNumeric, EachPassKeepsResultsAndIsIdempotent) {
  for (const auto& [name, run] : kPasses) {
    int changed = 0;
    for (uint32_t seed = 1; seed <= 30; ++seed) {
      test::RandomGraph r = bait_graph(seed);
      SCOPED_TRACE(name + ", seed " + std::to_string(seed) + "\n" + print_graph(*r.graph));
      std::unique_ptr<Graph> g = r.graph->clone();
      changed += run(*g) ? 1 : 0;
      verify_graph(*g);
      std::string once = print_graph(*g);
      EXPECT_FALSE(run(*g)) << "second run changed something";
      EXPECT_EQ(print_graph(*g), once);
      expect_same_values(*g, test::interpret(*r.graph, r.inputs), test::interpret(*g, r.inputs));
    }
    EXPECT_GT(changed, 10) << name << " changed too few graphs to test anything";
  }
}

TEST(PipelineNumeric, EveryPassIsIdempotentOnEveryIrTestInput) {
  namespace fs = std::filesystem;
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(KILN_TEST_IR_DIR)) {
    std::string path = entry.path().string();
    if (!path.ends_with(".txt")) continue;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    ++files;
    for (const auto& [name, run] : kPasses) {
      SCOPED_TRACE(name + " on " + path);
      std::unique_ptr<Graph> g = parse_graph(text.str());
      run(*g);
      verify_graph(*g);
      std::string once = print_graph(*g);
      EXPECT_FALSE(run(*g)) << "second run changed something";
      EXPECT_EQ(print_graph(*g), once);
    }
  }
  EXPECT_GE(files, 20);
}

}  // namespace
}  // namespace kiln
