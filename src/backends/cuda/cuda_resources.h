// Per-backend CUDA state shared by its kernels: the cuBLASLt handle and the
// GEMM workspace. Created lazily (the first matmul lowered), released when
// the backend and all its kernels are gone.
//
// The workspace is one buffer per backend, which is safe because one
// Executable runs one call at a time and orders calls across streams (the
// fence in runtime/executable.h). It comes from the executable's allocator
// (set_allocator; under torch, torch's caching allocator), else cudaMalloc.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>

#include "runtime/allocator.h"

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
  // Where the workspace comes from, if set before its first use.
  void set_allocator(std::shared_ptr<Allocator> allocator);

 private:
  int device_;
  std::mutex mutex_;
  void* cublaslt_ = nullptr;
  void* workspace_ = nullptr;
  std::shared_ptr<Allocator> allocator_;
  DeviceBuffer workspace_buffer_;  // when allocator_ gave the workspace
};

}  // namespace kiln::cuda
