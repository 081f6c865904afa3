// The pass manager: stats per pass with cleanup after changes, fixpoint
// groups, verification naming the pass that broke the graph, errors naming
// the pass, and IR dumps only when (and for the pass) asked.
#include <gtest/gtest.h>

#include <sstream>

#include "ops/op_def.h"
#include "passes/pass.h"
#include "passes/passes.h"
#include "support/error.h"

namespace kiln {
namespace {

PipelineOptions quiet() {
  PipelineOptions o;
  o.verify = true;
  o.dump_ir.clear();
  return o;
}

std::unique_ptr<Graph> small_graph() {
  auto g = std::make_unique<Graph>();
  Value* x = g->add_input("x", TensorType(DType::f32, {4}));
  Value* a = g->add_node(get_op("exp"), {x}, {}, "a")->outputs[0];
  g->add_node(get_op("neg"), {x}, {}, "dead");
  g->set_outputs({a});
  return g;
}

std::vector<std::string> names(const PipelineResult& r) {
  std::vector<std::string> out;
  for (const PassStats& s : r.stats) out.push_back(s.name + (s.changed ? "*" : ""));
  return out;
}

TEST(PassManager, RecordsEveryPassAndCleansUpAfterChanges) {
  auto g = small_graph();
  int calls = 0;
  Pass touch{"touch", [&](Graph&) { return ++calls == 1; }};
  PipelineResult r = run_pipeline(*g, {single(touch), single(touch)}, quiet());
  EXPECT_EQ(names(r), (std::vector<std::string>{"touch*", "dce (cleanup)*", "touch"}));
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(g->num_nodes(), 1u);  // the cleanup removed %dead
  for (const PassStats& s : r.stats) EXPECT_GE(s.microseconds, 0);
}

TEST(PassManager, CleanupCanBeTurnedOff) {
  auto g = small_graph();
  PipelineOptions o = quiet();
  o.cleanup = false;
  PipelineResult r = run_pipeline(*g, {single({"touch", [](Graph&) { return true; }})}, o);
  EXPECT_EQ(names(r), (std::vector<std::string>{"touch*"}));
  EXPECT_EQ(g->num_nodes(), 2u);
}

TEST(PassManager, FixpointRepeatsUntilNothingChangesWithinTheBound) {
  auto g = small_graph();
  int left = 3;
  Pass countdown{"countdown", [&](Graph&) { return left-- > 0; }};
  Pass idle{"idle", [](Graph&) { return false; }};
  PipelineOptions o = quiet();
  o.cleanup = false;
  PipelineResult r = run_pipeline(*g, {fixpoint({countdown, idle})}, o);
  EXPECT_EQ(names(r), (std::vector<std::string>{"countdown*", "idle", "countdown*", "idle", "countdown*", "idle",
                                                "countdown", "idle"}));
  left = 100;
  r = run_pipeline(*g, {fixpoint({countdown}, 2)}, o);
  EXPECT_EQ(names(r), (std::vector<std::string>{"countdown*", "countdown*"}));
  EXPECT_THROW(fixpoint({countdown}, 0), Error);
}

TEST(PassManager, VerificationNamesThePassThatBrokeTheGraph) {
  auto g = small_graph();
  Pass breaker{"breaker", [](Graph& graph) {
                 graph.nodes()[0]->outputs[0]->type = TensorType(DType::f16, {4});  // exp(f32) is not f16
                 return true;
               }};
  try {
    run_pipeline(*g, {single(breaker)}, quiet());
    FAIL() << "expected a verification error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("after pass 'breaker'"), std::string::npos) << m;
    EXPECT_NE(m.find("'a'"), std::string::npos) << m;
  }
  // Without verification the broken graph goes through unnoticed.
  auto g2 = small_graph();
  PipelineOptions o = quiet();
  o.verify = false;
  EXPECT_NO_THROW(run_pipeline(*g2, {single(breaker)}, o));
}

TEST(PassManager, ErrorsInAPassNameIt) {
  auto g = small_graph();
  Pass bad{"bad", [](Graph&) -> bool { fail(ErrorKind::unsupported, "no can do"); }};
  try {
    run_pipeline(*g, {single(bad)}, quiet());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "pass 'bad': no can do");
    EXPECT_EQ(e.kind(), ErrorKind::unsupported);
  }
}

TEST(PassManager, DumpsAfterEveryPassOrOnlyTheNamedOne) {
  Pass a{"alpha", [](Graph&) { return false; }};
  Pass b{"beta", [](Graph&) { return false; }};
  std::ostringstream out;
  PipelineOptions o = quiet();
  o.dump_to = &out;
  o.dump_ir = "beta";
  auto g = small_graph();
  run_pipeline(*g, {single(a), single(b)}, o);
  EXPECT_EQ(out.str().find("// IR after alpha"), std::string::npos);
  EXPECT_NE(out.str().find("// IR after beta\ngraph {\n  input %x : f32[4]\n"), std::string::npos) << out.str();
  out.str("");
  o.dump_ir = "1";
  run_pipeline(*g, {single(a), single(b)}, o);
  EXPECT_NE(out.str().find("// IR after alpha"), std::string::npos);
  EXPECT_NE(out.str().find("// IR after beta"), std::string::npos);
  out.str("");
  o.dump_ir = "";
  run_pipeline(*g, {single(a), single(b)}, o);
  EXPECT_EQ(out.str(), "");
}

TEST(PassManager, DefaultPipelineListsThePassesInOrder) {
  std::vector<std::string> order;
  for (const PipelineStep& step : default_pipeline())
    for (const Pass& p : step.passes) order.push_back(p.name + (step.fixpoint ? " (fixpoint)" : ""));
  EXPECT_EQ(order, (std::vector<std::string>{"verify", "dce", "patchify_convs", "simplify (fixpoint)", "recognize_gelu (fixpoint)", "fold_literals (fixpoint)",
                                             "cse (fixpoint)", "fuse_attention (fixpoint)",
                                             "narrow_attention (fixpoint)", "causal_masks (fixpoint)", "matmul_row_order (fixpoint)",
                                             "read_through_copies (fixpoint)", "fuse_epilogues", "fuse_elementwise", "pair_copies",
                                             "dce"}));
}

}  // namespace
}  // namespace kiln
