// The graph passes, one per file in src/passes/. Each is deterministic and
// idempotent (running it again right after changes nothing) and returns
// whether it changed the graph. The pipeline order lives in pipeline.cpp.
#pragma once

#include <cstdint>

#include "ir/graph.h"

namespace kiln {

// Checks the graph's invariants (verify_graph); never changes it.
bool verify_pass(Graph& graph);

// Removes nodes none of whose outputs is used or a graph output, literals and
// weights nobody uses. Graph inputs are never removed: they are the call's
// positional signature. Unused weights are dropped: they are bound by
// weight_key, so dropping one only means the executable holds no reference to
// a tensor it never reads (Note [Weights], promise 1).
bool dce(Graph& graph);

// Common subexpression elimination: identical literals (same type and bytes)
// become one; nodes with the same op, inputs and attrs become one (commutative
// binary ops match with swapped inputs too). Fused nodes are not merged (their
// bodies are not compared). Two values that are both graph outputs are not
// merged, so outputs stay distinct tensors.
bool cse(Graph& graph);

// Evaluates nodes whose inputs are all literals (never weights: Note
// [Weights]) with their CPU kernel, replacing them by literals. Results larger
// than max_bytes are left alone, as are ops without a CPU kernel, and creation
// ops (full, arange) with more than kMaxFoldedCreationElements elements
// (they already cost nothing to store). Views of literals (reshape, permute,
// expand, ...) fold into contiguous literals.
struct FoldOptions {
  int64_t max_bytes = int64_t{1} << 20;
};
inline constexpr int64_t kMaxFoldedCreationElements = 16;
bool fold_literals(Graph& graph, const FoldOptions& options);
bool fold_literals(Graph& graph);

// Algebraic and structural simplifications that are provably identities; see
// simplify.cpp for the list.
bool simplify(Graph& graph);

// Batch norm after a convolution with constant parameters becomes a
// convolution with weight-only weight and bias expressions; see
// fold_batch_norm.cpp. Run by the weight-fold stage, not the pipeline.
bool fold_batch_norm(Graph& graph);

// Convolutions whose stride equals their kernel (patch embeddings) become a
// matrix product of the patches; see patchify_convs.cpp.
bool patchify_convs(Graph& graph);

// f16/bf16 convolution chains run channels-last (NHWC), with layout
// conversions only at the chains' boundaries; see choose_layout.cpp. Run by
// the weight-fold stage for CUDA graphs, not the pipeline.
bool choose_layout(Graph& graph);

// Runs an f32 graph's math in f16/bf16 with the same signature; constant
// expressions stay in `from` and are cast where they meet activations (so the
// casts fold into constants); see lower_precision.cpp.
bool lower_precision(Graph& graph, DType from, DType to);

// softmax(Q K^T * scale [+ mask]) V spelled as matmul/softmax/matmul becomes
// one attention node; see fuse_attention.cpp.
bool fuse_attention(Graph& graph);

// f32 attention on f16/bf16 values widened for it, its result narrowed back,
// runs in the narrow dtype; see narrow_attention.cpp.
bool narrow_attention(Graph& graph);

// A contiguous copy that attention or another copy reads only through views
// becomes strided views (as_strided) of its source; see read_through_copies.cpp.
bool read_through_copies(Graph& graph);

// A matrix product of a permuted copy's rows multiplies the rows where they
// are and is read through the permutation; see matmul_row_order.cpp.
bool matmul_row_order(Graph& graph);

// An attention whose mask is a constant holding the causal pattern becomes
// attention {causal=true} without it; see causal_masks.cpp.
bool causal_masks(Graph& graph);

// The tanh approximation of GELU written out op by op (GPT-2's "gelu_new")
// becomes gelu_tanh; see recognize_gelu.cpp.
bool recognize_gelu(Graph& graph);

// Bias adds and activations after matmul, ReLU after conv2d, become the
// fused ops matmul_epilogue and conv2d_fused; see fuse_epilogues.cpp.
bool fuse_epilogues(Graph& graph);

// Contiguous copies of values of one type become one `copies` node (one
// launch on CUDA); see pair_copies.cpp.
bool pair_copies(Graph& graph);

// Groups connected elementwise ops (and casts) of the same output dims into
// nodes of op "fused" with a body graph; see fuse_elementwise.cpp.
bool fuse_elementwise(Graph& graph);

}  // namespace kiln
