// The pass manager's vocabulary (DESIGN.md section 6): a Pass is a name and a
// function `bool run(Graph&)` that reports whether it changed the graph. A
// pipeline is a list of steps, each one pass or a fixpoint group of passes
// (run in order, again and again, until none of them changes the graph).
// run_pipeline runs the steps and, around every pass, does what no pass does
// for itself: cleanup (dce) after a change, verification when asked
// (KILN_VERIFY_PASSES), timing, and IR dumps to stderr (KILN_DUMP_IR).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

struct Pass {
  std::string name;
  std::function<bool(Graph&)> run;  // returns whether the graph changed
};

// One entry of a pipeline: a single pass, or (fixpoint = true) a group run
// until no pass in it reports a change, at most max_iterations rounds.
struct PipelineStep {
  std::vector<Pass> passes;
  bool fixpoint = false;
  int max_iterations = 8;
};

PipelineStep single(Pass pass);
PipelineStep fixpoint(std::vector<Pass> passes, int max_iterations = 8);

// One record per pass run (a pass in a fixpoint group appears once per round;
// cleanup runs appear as "dce (cleanup)").
struct PassStats {
  std::string name;
  bool changed = false;
  int64_t microseconds = 0;
};

struct PipelineOptions {
  bool verify;            // verify_graph after every pass; default: env::verify_passes()
  std::string dump_ir;    // "1": dump after every pass; a pass name: after that one; default: env::dump_ir()
  bool cleanup = true;    // run dce after each pass that changed the graph
  std::ostream* dump_to;  // where dumps go; default: std::cerr
  PipelineOptions();
};

struct PipelineResult {
  bool changed = false;
  std::vector<PassStats> stats;
};

// Runs `steps` over `graph`. A pass that throws, or a graph that fails
// verification after a pass, raises kiln::Error naming the pass.
PipelineResult run_pipeline(Graph& graph, const std::vector<PipelineStep>& steps,
                            const PipelineOptions& options = PipelineOptions());

// The default pipeline (src/passes/pipeline.cpp) and running it.
const std::vector<PipelineStep>& default_pipeline();
PipelineResult run_pipeline(Graph& graph, const PipelineOptions& options = PipelineOptions());

}  // namespace kiln
