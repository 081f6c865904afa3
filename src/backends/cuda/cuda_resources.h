// Per-backend CUDA state shared by its kernels: the cuBLASLt handle and the
// GEMM workspace. Created lazily (the first matmul lowered), released when
// the backend and all its kernels are gone. Side streams (runtime/backend.h)
// have workspaces of their own.
//
// The workspace is one buffer per backend, which is safe because one
// Executable runs one call at a time and orders calls across streams (the
// fence in runtime/executable.h). It comes from the executable's allocator
// (set_allocator; under torch, torch's caching allocator), else cudaMalloc.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

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
  // The workspace for kernels on `stream` and its size: a side stream's own (add_side_workspace), else
  // workspace(). Kernels on side streams run beside those on the caller's, so they never share it.
  std::pair<void*, size_t> workspace_for(void* stream);
  // Registers `buffer` as the workspace of side stream `stream` (until remove_side_workspace).
  void add_side_workspace(void* stream, DeviceBuffer buffer);
  void remove_side_workspace(void* stream);
  // `bytes` of device memory from the allocator (else cudaMalloc): a side stream's workspace.
  DeviceBuffer allocate_workspace(size_t bytes);
  // Where the workspace comes from, if set before its first use.
  void set_allocator(std::shared_ptr<Allocator> allocator);

 private:
  int device_;
  std::mutex mutex_;
  void* cublaslt_ = nullptr;
  void* workspace_ = nullptr;
  std::shared_ptr<Allocator> allocator_;
  DeviceBuffer workspace_buffer_;  // when allocator_ gave the workspace
  struct SideWorkspace {
    void* stream;
    DeviceBuffer buffer;
  };
  std::vector<SideWorkspace> side_;  // a few at most: scanned
};

}  // namespace kiln::cuda
