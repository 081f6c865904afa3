// Evaluates one elementwise op (Note [Elementwise], src/ops/elementwise.def) on
// contiguous buffers already converted to a compute type. The strided CPU
// kernels and the fused-group kernel both evaluate ops through this, so each
// op's scalar expression is instantiated once per compute type.
//
// Conventions, in compute type C (float for f16/bf16/f32, double for f64,
// int64_t for integers and bool):
//   arith, floating  values in, values out (floating ops have no int64_t form)
//   compare          values in, 0 or 1 out
//   logical          any value in (nonzero is true), 0 or 1 out
//   select (where)   input 0 is the condition as 0 or 1 (nonzero is true)
// The caller converts storage to C before and C to storage after (for bool
// outputs a nonzero C value is true).
#pragma once

#include <cstdint>

#include "ops/op_def.h"

namespace kiln::cpu {

// inputs[k] points at n values of operand k (op.elementwise->arity operands).
template <typename C>
using ElementwiseFn = void (*)(const C* const* inputs, C* out, int64_t n);

// The evaluator of `op` in compute type C (float, double or int64_t): resolve
// once, call per chunk. Returns nullptr when `op` is not elementwise or has no
// form in C (floating-kind ops in int64_t).
template <typename C>
ElementwiseFn<C> elementwise_fn(const OpDef& op);

// Applies `op` to n contiguous values; throws kiln::Error(unsupported) when
// elementwise_fn<C>(op) is nullptr. `out` may alias an input.
template <typename C>
void apply_elementwise(const OpDef& op, const C* const* inputs, C* out, int64_t n);

extern template ElementwiseFn<float> elementwise_fn<float>(const OpDef&);
extern template ElementwiseFn<double> elementwise_fn<double>(const OpDef&);
extern template ElementwiseFn<int64_t> elementwise_fn<int64_t>(const OpDef&);
extern template void apply_elementwise<float>(const OpDef&, const float* const*, float*, int64_t);
extern template void apply_elementwise<double>(const OpDef&, const double* const*, double*, int64_t);
extern template void apply_elementwise<int64_t>(const OpDef&, const int64_t* const*, int64_t*, int64_t);

}  // namespace kiln::cpu
