// The CUDA kernel for fused elementwise groups (Note [Fused groups] in
// ops/fused_ops.cpp), interpreter style: the group's body arrives as a short
// program (FusedArgs::steps) and each thread runs it for its elements in
// registers, one pass over memory for the whole group. Every step's result is
// rounded to its dtype, so results equal the ops run one by one (as the CPU
// fused kernel does). NVRTC-generated source per body (issue 4) will replace
// this for speed; the lowering and the arguments stay the same.
#include "backends/cuda/device_math.cuh"

namespace kiln::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxSlots = kMaxFusedInputs + kMaxFusedLiterals + kMaxFusedOps;

template <typename C>
__global__ void __launch_bounds__(kThreads) fused_kernel(const __grid_constant__ FusedArgs a) {
  C slot[kMaxSlots];
  for (int k = 0; k < a.num_literals; ++k)
    slot[a.num_inputs + k] = std::is_integral_v<C> ? static_cast<C>(a.literal_i[k]) : static_cast<C>(a.literal_f[k]);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < a.space.n; i += step) {
    for (int k = 0; k < a.num_inputs; ++k)
      slot[k] = load_as<C>(a.in[k].data, a.in[k].dtype, operand_offset(i, a.space, a.in[k]));
    for (int s = 0; s < a.num_steps; ++s) {
      const FusedStep& st = a.steps[s];
      C r = apply_op<C>(st.op, slot[st.in[0]], slot[st.in[1]], slot[st.in[2]]);
      slot[st.out] = round_to<C>(st.dtype, r);
    }
    for (int k = 0; k < a.num_outputs; ++k) store_as<C>(a.out[k], a.out_dtype[k], i, slot[a.out_slot[k]]);
  }
}

template <typename C>
cudaError_t launch(const FusedArgs& a, cudaStream_t stream) {
  if (a.space.n == 0) return cudaSuccess;
  int64_t blocks = (a.space.n + kThreads - 1) / kThreads;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  fused_kernel<C><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_fused(Compute c, const FusedArgs& args, cudaStream_t stream) {
  switch (c) {
    case Compute::f32: return launch<float>(args, stream);
    case Compute::f64: return launch<double>(args, stream);
    case Compute::i64: return launch<int64_t>(args, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace kiln::cuda
