// CUDA kernels for every op in elementwise.def and for cast: one kernel
// template over (op functor, compute type), instantiated from the X-macro, so
// no op is written by hand. Operands are read through their broadcast strides
// in any dtype and converted to the compute type; the result is converted to
// the output's dtype (device_math.cuh has the CPU backend's rules).
#include "backends/cuda/device_math.cuh"

namespace kiln::cuda {

namespace {

constexpr int kThreads = 256;

template <typename C>
KILN_D C load_operand(const ElementwiseArgs& a, int k, int64_t i) {
  int64_t off = operand_offset(i, a.space, a.in[k]);
  return a.as_bool ? load_bool<C>(a.in[k].data, a.in[k].dtype, off) : load_as<C>(a.in[k].data, a.in[k].dtype, off);
}

template <int Op, typename C>
__global__ void __launch_bounds__(kThreads) elementwise_kernel(const __grid_constant__ ElementwiseArgs a) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < a.space.n; i += step) {
    C x = load_operand<C>(a, 0, i);
    C y = a.arity > 1 ? load_operand<C>(a, 1, i) : C(0);
    C z = a.arity > 2 ? load_operand<C>(a, 2, i) : C(0);
    store_as<C>(a.out, a.out_dtype, i, apply_op<C>(Op, x, y, z));
  }
}

using LaunchFn = cudaError_t (*)(const ElementwiseArgs&, cudaStream_t);

template <int Op, typename C>
cudaError_t launch_one(const ElementwiseArgs& a, cudaStream_t stream) {
  if (a.space.n == 0) return cudaSuccess;
  int64_t blocks = (a.space.n + kThreads - 1) / kThreads;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  elementwise_kernel<Op, C><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

struct Forms {
  LaunchFn f32, f64, i64;
};

template <int Op, bool FloatingOnly>
constexpr Forms forms() {
  return Forms{&launch_one<Op, float>, &launch_one<Op, double>, FloatingOnly ? nullptr : &launch_one<Op, int64_t>};
}

constexpr Forms kForms[] = {
#define KILN_ELEMENTWISE(name, ...) forms<kOp_##name, DeviceOp_##name::floating_only>(),
#include "ops/elementwise.def"
#undef KILN_ELEMENTWISE
};
constexpr Forms kCastForms = forms<kCastOp, false>();

constexpr const char* kNames[] = {
#define KILN_ELEMENTWISE(name, ...) #name,
#include "ops/elementwise.def"
#undef KILN_ELEMENTWISE
};

LaunchFn form_of(int op, Compute c) {
  const Forms& f = op == kCastOp ? kCastForms : kForms[op];
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
  return form_of(op, c)(args, stream);
}

}  // namespace kiln::cuda
