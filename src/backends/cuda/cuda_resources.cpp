// Per-backend CUDA state (cuda_resources.h).
#include "backends/cuda/cuda_resources.h"

#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_common.h"
#include "support/error.h"

#ifdef KILN_CUDA_HAVE_CUBLASLT
#include <cublasLt.h>
#endif

namespace kiln::cuda {

CudaResources::~CudaResources() {
  DeviceGuard guard(device_);
  if (workspace_ != nullptr) cudaFree(workspace_);
#ifdef KILN_CUDA_HAVE_CUBLASLT
  if (cublaslt_ != nullptr) cublasLtDestroy(static_cast<cublasLtHandle_t>(cublaslt_));
#endif
}

void* CudaResources::cublaslt() {
  std::lock_guard<std::mutex> lock(mutex_);
#ifdef KILN_CUDA_HAVE_CUBLASLT
  if (cublaslt_ == nullptr) {
    DeviceGuard guard(device_);
    cublasLtHandle_t h = nullptr;
    cublasStatus_t st = cublasLtCreate(&h);
    KILN_CHECK_KIND(runtime, st == CUBLAS_STATUS_SUCCESS, "cublasLtCreate failed on cuda:", device_, " (status ",
                    static_cast<int>(st), ")");
    cublaslt_ = h;
  }
#endif
  return cublaslt_;
}

void* CudaResources::workspace() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (workspace_ == nullptr && workspace_buffer_.data() == nullptr) {
    if (allocator_ != nullptr) {
      workspace_buffer_ = allocator_->allocate(kWorkspaceBytes, 256);
    } else {
      DeviceGuard guard(device_);
      check_cuda(cudaMalloc(&workspace_, kWorkspaceBytes),
                 str_cat("cannot allocate the GEMM workspace on cuda:", device_));
    }
  }
  return workspace_ != nullptr ? workspace_ : workspace_buffer_.data();
}

void CudaResources::set_allocator(std::shared_ptr<Allocator> allocator) {
  std::lock_guard<std::mutex> lock(mutex_);
  allocator_ = std::move(allocator);
}

}  // namespace kiln::cuda
