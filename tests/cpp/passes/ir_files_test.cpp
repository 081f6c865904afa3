// Before/after IR text tests: for every tests/ir/<pass>/<case>.before.txt,
// parse it, run <pass> (or the whole pipeline for the folder "pipeline"), and
// compare the printed result with <case>.after.txt exactly ('#' lines in the
// expected file are comments and are ignored). Every case also checks that
// the graph verifies before and after, and that running the pass a second
// time reports no change and prints the same text (idempotence).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "passes/passes.h"
#include "passes/weight_folds.h"
#include "support/error.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string strip_comments(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    size_t first = line.find_first_not_of(' ');
    if (first != std::string::npos && line[first] == '#') continue;
    out += line + "\n";
  }
  return out;
}

bool run_pipeline_quietly(Graph& g) {
  PipelineOptions options;
  options.verify = true;
  options.dump_ir.clear();
  return run_pipeline(g, options).changed;
}

const std::map<std::string, std::function<bool(Graph&)>>& passes_by_folder() {
  static const std::map<std::string, std::function<bool(Graph&)>> passes = {
      {"dce", dce},
      {"cse", cse},
      {"simplify", simplify},
      {"fold_literals", [](Graph& g) { return fold_literals(g); }},
      {"fuse_elementwise", fuse_elementwise},
      {"fuse_epilogues", fuse_epilogues},
      {"fuse_attention", fuse_attention},
      {"narrow_attention", narrow_attention},
      {"causal_masks", causal_masks},
      {"recognize_gelu", recognize_gelu},
      {"pair_copies", pair_copies},
      {"read_through_copies", read_through_copies},
      {"matmul_row_order", matmul_row_order},
      {"choose_layout", choose_layout},
      {"patchify_convs", patchify_convs},
      {"pipeline", run_pipeline_quietly},
      {"fold_batch_norm", fold_batch_norm},
      {"lower_precision", [](Graph& g) { return lower_precision(g, DType::f32, DType::f16); }},
      // The main graph after the split; the fold graphs are checked in weight_folds_test.cpp.
      {"split_weight_folds", [](Graph& g) { return !split_weight_folds(g).empty(); }},
  };
  return passes;
}

void check_folder(const std::string& folder) {
  const auto& run = passes_by_folder().at(folder);
  fs::path dir = fs::path(KILN_TEST_IR_DIR) / folder;
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::vector<fs::path> cases;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.size() > 11 && name.ends_with(".before.txt")) cases.push_back(entry.path());
  }
  std::sort(cases.begin(), cases.end());
  ASSERT_FALSE(cases.empty()) << "no cases in " << dir;
  for (const fs::path& before : cases) {
    std::string stem = before.filename().string();
    stem.resize(stem.size() - std::string(".before.txt").size());
    SCOPED_TRACE(folder + "/" + stem);
    fs::path after = dir / (stem + ".after.txt");
    ASSERT_TRUE(fs::exists(after)) << "missing " << after;
    std::unique_ptr<Graph> g;
    try {
      g = parse_graph(read_text(before));
      verify_graph(*g);
      bool changed = run(*g);
      verify_graph(*g);
      std::string printed = print_graph(*g);
      EXPECT_EQ(printed, strip_comments(read_text(after)));
      std::string canonical_before = print_graph(*parse_graph(read_text(before)));
      EXPECT_EQ(changed, printed != canonical_before) << "the pass's changed flag disagrees with the text";
      EXPECT_EQ(print_graph(*parse_graph(printed)), printed) << "the result does not round-trip";
      bool again = run(*g);
      EXPECT_FALSE(again) << "second run reported a change";
      EXPECT_EQ(print_graph(*g), printed) << "second run changed the graph";
    } catch (const Error& e) {
      ADD_FAILURE() << "threw: " << e.what();
    }
  }
}

TEST(IrFiles, Dce) { check_folder("dce"); }
TEST(IrFiles, Cse) { check_folder("cse"); }
TEST(IrFiles, Simplify) { check_folder("simplify"); }
TEST(IrFiles, FoldLiterals) { check_folder("fold_literals"); }
TEST(IrFiles, FuseElementwise) { check_folder("fuse_elementwise"); }
TEST(IrFiles, FuseEpilogues) { check_folder("fuse_epilogues"); }
TEST(IrFiles, FuseAttention) { check_folder("fuse_attention"); }
TEST(IrFiles, NarrowAttention) { check_folder("narrow_attention"); }
TEST(IrFiles, CausalMasks) { check_folder("causal_masks"); }
TEST(IrFiles, RecognizeGelu) { check_folder("recognize_gelu"); }
TEST(IrFiles, PairCopies) { check_folder("pair_copies"); }
TEST(IrFiles, ReadThroughCopies) { check_folder("read_through_copies"); }
TEST(IrFiles, MatmulRowOrder) { check_folder("matmul_row_order"); }
TEST(IrFiles, ChooseLayout) { check_folder("choose_layout"); }
TEST(IrFiles, PatchifyConvs) { check_folder("patchify_convs"); }
TEST(IrFiles, Pipeline) { check_folder("pipeline"); }
TEST(IrFiles, FoldBatchNorm) { check_folder("fold_batch_norm"); }
TEST(IrFiles, LowerPrecision) { check_folder("lower_precision"); }
TEST(IrFiles, SplitWeightFolds) { check_folder("split_weight_folds"); }

}  // namespace
}  // namespace kiln
