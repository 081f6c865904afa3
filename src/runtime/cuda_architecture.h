// Which GPUs a saved program may run on. A program compiled for CUDA records
// the architecture it was built and checked on ("sm_90", metadata key
// kiln.cuda_arch); its kernels are generated again at load for the GPU at
// hand, and a GPU of that architecture or a newer one runs it.
#pragma once

#include <string>

namespace kiln {

inline constexpr const char* kCudaArchitectureKey = "kiln.cuda_arch";

// Throws kiln::Error naming both architectures and `device` ("cuda:0") when
// `here` is older than `built` (unsupported), or when `built` is not of the
// form sm_<digits> (corrupt_file).
void check_cuda_architecture(const std::string& built, const std::string& here, const std::string& device);

}  // namespace kiln
