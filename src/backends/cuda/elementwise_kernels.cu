// CUDA kernels for every op in elementwise.def and for cast: one kernel
// template over (op functor, compute type), instantiated from the X-macro, so
// no op is written by hand. The templates are in elementwise_kernels.cuh, the
// instantiations in elementwise_part<K>.cu; this file dispatches. Operands are
// read through their broadcast strides in any dtype and converted to the
// compute type; the result is converted to the output's dtype (device_math.cuh
// has the CPU backend's rules).
//
// The index space is collapsed over the output and every operand first, so
// operands contiguous with the output become linear (offset == index). An
// f16 or bf16 output computed in float, 16-byte aligned, takes the packed
// kernel: each thread computes kVec consecutive elements and stores them as
// one 16-byte vector; see load_group for how operands are read.
#include "backends/cuda/elementwise_kernels.cuh"

namespace kiln::cuda {

namespace {

constexpr const Forms* const* kParts[kElementwiseParts] = {&kElementwisePart0, &kElementwisePart1, &kElementwisePart2,
                                                           &kElementwisePart3};

constexpr const char* kNames[] = {
#define KILN_ELEMENTWISE(name, ...) #name,
#include "ops/elementwise.def"
#undef KILN_ELEMENTWISE
};

LaunchFn form_of(int op, Compute c) {
  const Forms& f = op == kCastOp ? kElementwiseCastForms : (*kParts[op % kElementwiseParts])[op];
  return c == Compute::f32 ? f.f32 : c == Compute::f64 ? f.f64 : f.i64;
}

}  // namespace

int elementwise_op_index(const char* name) {
  for (int i = 0; i < kNumElementwiseOps; ++i) {
    const char *a = kNames[i], *b = name;
    while (*a != 0 && *a == *b) ++a, ++b;
    if (*a == 0 && *b == 0) return i;
  }
  return -1;
}

bool elementwise_has_form(int op, Compute c) {
  if (op != kCastOp && (op < 0 || op >= kNumElementwiseOps)) return false;
  return form_of(op, c) != nullptr;
}

cudaError_t launch_elementwise(int op, Compute c, const ElementwiseArgs& args, cudaStream_t stream) {
  if (!elementwise_has_form(op, c)) return cudaErrorInvalidValue;
  ElementwiseArgs a = args;
  int64_t out_strides[kMaxRank];  // the output is contiguous over the space
  int64_t stride = 1;
  for (int d = a.space.rank - 1; d >= 0; --d) {
    out_strides[d] = stride;
    stride *= a.space.dims[d];
  }
  for (int k = a.arity; k < 3; ++k) a.in[k] = Operand{};  // unused: zero strides never block a merge
  collapse(a.space, {out_strides, a.in[0].strides, a.in[1].strides, a.in[2].strides});
  for (Operand& o : a.in) {
    o.linear = true;
    for (int d = 0; d < a.space.rank; ++d) o.linear = o.linear && o.strides[d] == out_strides[d];
  }
  return form_of(op, c)(a, stream);
}

}  // namespace kiln::cuda
