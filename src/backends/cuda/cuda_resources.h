// Per-backend CUDA state shared by its kernels: the cuBLASLt handle and the
// GEMM workspace. Created lazily (the first matmul lowered), released when
// the backend and all its kernels are gone.
//
// The workspace is one buffer per backend, which is safe because one
// Executable runs one call at a time and its kernels run in order on one
// stream. Moving it into the memory plan (a workspace value in the arena, so
// torch's allocator accounts for it) is part of issue 4's remaining work.
#pragma once

#include <cstddef>
#include <mutex>

namespace kiln::cuda {

class CudaResources {
 public:
  explicit CudaResources(int device) : device_(device) {}
  ~CudaResources();
  CudaResources(const CudaResources&) = delete;
  CudaResources& operator=(const CudaResources&) = delete;

  int device() const { return device_; }
  // The cuBLASLt handle (a cublasLtHandle_t), created on first use.
  void* cublaslt();
  static constexpr size_t kWorkspaceBytes = 32u << 20;
  // kWorkspaceBytes of device memory, allocated on first use (at lowering).
  void* workspace();

 private:
  int device_;
  std::mutex mutex_;
  void* cublaslt_ = nullptr;
  void* workspace_ = nullptr;
};

}  // namespace kiln::cuda
