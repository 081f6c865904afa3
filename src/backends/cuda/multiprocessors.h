// The current CUDA device's multiprocessor count, for launch shapes that
// depend on how many blocks fill the GPU (attention's split keys, the row
// kernels' rows per block). Read once per device ordinal below 64.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>

namespace kiln::cuda {

// 0 when the device cannot be asked (callers then take their default shape).
inline int current_multiprocessors() {
  static std::atomic<int> counts[64] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device >= 64) return 0;
  int n = counts[device].load();
  if (n == 0 && cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) == cudaSuccess) counts[device] = n;
  return n;
}

}  // namespace kiln::cuda
