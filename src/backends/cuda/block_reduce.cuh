// Warp- and block-wide reductions for the row kernels (softmax, layer_norm,
// sums): warp shuffles, then one value per warp through shared memory. Every
// thread of the warp (block) must call them; all get the result.
#pragma once

#include "backends/cuda/device_math.cuh"

namespace kiln::cuda {

struct SumOp {
  template <typename T>
  KILN_D T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {  // NaN wins, like torch.amax
  template <typename T>
  KILN_D T operator()(T a, T b) const { return sm::k_maximum(a, b); }
};
struct MinOp {
  template <typename T>
  KILN_D T operator()(T a, T b) const { return sm::k_minimum(a, b); }
};

// Every lane of a full warp gets the reduction (a butterfly: the two lanes
// of each pair combine the same two values, so sums agree bit for bit).
template <typename T, typename Op>
KILN_D T warp_reduce(T v, Op op) {
  for (int d = 16; d > 0; d /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, d));
  return v;
}

template <typename T, typename Op>
KILN_D T block_reduce(T v, Op op, T* shared /* 32 entries */) {
  v = warp_reduce(v, op);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = (blockDim.x + 31) / 32;
  __syncthreads();  // shared may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = shared[0];
  for (int w = 1; w < warps; ++w) v = op(v, shared[w]);
  return v;
}

}  // namespace kiln::cuda
