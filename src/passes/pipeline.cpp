// The pipeline: the one list of passes kiln runs on every graph, in order.
// The pass manager adds cleanup (dce) after any pass that changes the graph,
// and verification after every pass when KILN_VERIFY_PASSES asks for it.
#include "passes/pass.h"
#include "passes/passes.h"

namespace kiln {

const std::vector<PipelineStep>& default_pipeline() {
  static const std::vector<PipelineStep> steps = {
      single({"verify", verify_pass}),
      single({"dce", dce}),
      single({"patchify_convs", patchify_convs}),
      fixpoint({
          {"simplify", simplify},
          {"recognize_gelu", recognize_gelu},
          {"fold_literals", [](Graph& g) { return fold_literals(g); }},
          {"cse", cse},
          {"fuse_attention", fuse_attention},
          {"narrow_attention", narrow_attention},
          {"causal_masks", causal_masks},
          {"matmul_row_order", matmul_row_order},
          {"read_through_copies", read_through_copies},
      }),
      single({"fuse_epilogues", fuse_epilogues}),
      single({"fuse_elementwise", fuse_elementwise}),
      single({"pair_copies", pair_copies}),
      single({"dce", dce}),
  };
  return steps;
}

}  // namespace kiln
