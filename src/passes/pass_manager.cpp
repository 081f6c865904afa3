// The pass manager: runs pipeline steps, and around each pass does the
// bookkeeping no pass does for itself (cleanup, verification, timing, dumps).
#include <iostream>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "support/log.h"
#include "passes/passes.h"
#include "support/env.h"
#include "support/error.h"

namespace kiln {

PipelineStep single(Pass pass) { return PipelineStep{{std::move(pass)}, false, 1}; }

PipelineStep fixpoint(std::vector<Pass> passes, int max_iterations) {
  KILN_CHECK(max_iterations >= 1, "fixpoint group: max_iterations must be at least 1, got ", max_iterations);
  return PipelineStep{std::move(passes), true, max_iterations};
}

PipelineOptions::PipelineOptions()
    : verify(env::verify_passes()), dump_ir(env::dump_ir()), cleanup(true), dump_to(&std::cerr) {}

bool verify_pass(Graph& graph) {
  verify_graph(graph);
  return false;
}

namespace {

class Runner {
 public:
  Runner(Graph& graph, const PipelineOptions& options) : graph_(graph), options_(options) {}

  bool run_one(const Pass& pass) {
    bool changed = timed(pass.name, pass.run);
    if (changed && options_.cleanup && pass.name != "dce") timed("dce (cleanup)", dce);
    return changed;
  }

  PipelineResult result;

 private:
  bool timed(const std::string& name, const std::function<bool(Graph&)>& fn) {
    auto start = std::chrono::steady_clock::now();
    bool changed = false;
    try {
      changed = fn(graph_);
    } catch (const Error& e) {
      throw Error(e.kind(), str_cat("pass '", name, "': ", e.what()));
    }
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
    result.stats.push_back(PassStats{name, changed, us.count()});
    log_at(LogLevel::debug, "pass ", name, ": ", changed ? "changed" : "unchanged", ", ", us.count(), " us, ",
           graph_.num_nodes(), " nodes");
    result.changed = result.changed || changed;
    if (options_.verify) {
      try {
        verify_pass(graph_);
      } catch (const Error& e) {
        throw Error(e.kind(), str_cat("graph is invalid after pass '", name, "': ", e.what()));
      }
    }
    dump(name);
    return changed;
  }

  void dump(const std::string& name) {
    const std::string& want = options_.dump_ir;
    if (want.empty() || want == "0" || options_.dump_to == nullptr) return;
    if (want != "1" && want != name) return;
    *options_.dump_to << "// IR after " << name << "\n" << print_graph(graph_);
  }

  Graph& graph_;
  const PipelineOptions& options_;
};

}  // namespace

PipelineResult run_pipeline(Graph& graph, const std::vector<PipelineStep>& steps, const PipelineOptions& options) {
  Runner runner(graph, options);
  for (const PipelineStep& step : steps) {
    if (!step.fixpoint) {
      for (const Pass& pass : step.passes) runner.run_one(pass);
      continue;
    }
    for (int round = 0; round < step.max_iterations; ++round) {
      bool any = false;
      for (const Pass& pass : step.passes) any = runner.run_one(pass) || any;
      if (!any) break;
    }
  }
  return std::move(runner.result);
}

PipelineResult run_pipeline(Graph& graph, const PipelineOptions& options) {
  return run_pipeline(graph, default_pipeline(), options);
}

}  // namespace kiln
