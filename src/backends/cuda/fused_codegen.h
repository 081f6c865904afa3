// CUDA C++ source for one fused elementwise group (Note [Fused groups] in
// ops/fused_ops.cpp), generated when the node is lowered and compiled with
// NVRTC (nvrtc_compiler.h, kernel_cache.h). Pure C++: no CUDA headers, so the
// generator is tested without a GPU.
//
// Note [Generated fused kernels]
// The body becomes straight-line code over the compute type (float for
// f16/bf16/f32, double with an f64 value, long long for integers and bool),
// with every op's expression taken from elementwise.def and its math from
// ops/scalar_math.h (passed to NVRTC as a header), so generated code, the CPU
// reference and the other CUDA kernels compute the same thing. Every step's
// result is rounded to its dtype, as running the ops one by one would.
// Shapes and strides are fixed at lowering, so they are compile-time
// constants: a contiguous operand is read at the element's index, a
// broadcast or strided one through its baked strides (only the dims it steps
// along), a scalar once. Two kernels share the source:
//   kiln_fused_scalar  one element per thread (any pointers, any size);
//   kiln_fused_vec     `vec` consecutive elements per thread, with vector
//                      loads for operands contiguous along the last dim and
//                      vector stores for the outputs; used when the element
//                      count is a multiple of vec and every vector-read
//                      pointer is aligned to vec elements (checked per call).
// Both take one argument: an array of the inputs' then the outputs' pointers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::cuda {

struct FusedSource {
  std::string source;  // the whole translation unit (includes "scalar_math.h")
  int64_t numel = 0;   // elements of the group's output space
  int vec = 1;         // elements per thread of kiln_fused_vec; 1: no vector kernel
  // Per pointer (inputs, then outputs): bytes it must be aligned to for the
  // vector kernel (0: read element by element, any alignment).
  std::vector<int> vec_alignment;
};

inline constexpr const char* kFusedScalarKernel = "kiln_fused_scalar";
inline constexpr const char* kFusedVectorKernel = "kiln_fused_vec";
inline constexpr int kFusedThreads = 256;

// The source for `node` (op "fused"), or nullopt with *reason set when the
// body holds something the generator cannot express.
std::optional<FusedSource> generate_fused_source(const Node& node, std::string* reason);

// The text of ops/scalar_math.h, the one header the generated source includes.
const char* scalar_math_header_text();
inline constexpr const char* kScalarMathHeaderName = "scalar_math.h";

}  // namespace kiln::cuda
