// Internal: a small C++ face on cuDNN's backend (graph) API, used by the
// convolution lowering (conv_lowering.cpp). Only compiled when the build found
// cuDNN (KILN_CUDA_HAVE_CUDNN).
//
// Note [cuDNN plans]
// A node's cuDNN work is one operation graph (a convolution, maybe followed by
// pointwise bias add and ReLU). At lowering, the heuristics (mode A, then the
// fallback mode) list engine configurations; the first whose execution plan
// finalizes, whose workspace fits the backend's shared workspace
// (CudaResources::kWorkspaceBytes) and whose numerics are allowed (no tensor
// cores for f32: TF32 is not enabled) is kept with its workspace size. A call
// only binds pointers (a variant pack) and executes the plan on the caller's
// stream. Handles are one per device, shared by all kernels; setting the
// stream and enqueueing happen under the handle's mutex, so executables
// running on several threads do not race on cudnnSetStream.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::cuda {

// Throws kiln::Error(runtime) "<what>: cuDNN <status>: <last error>" unless ok.
void check_cudnn(cudnnStatus_t st, const std::string& what);

// One backend descriptor, destroyed with its owner.
class BackendDescriptor {
 public:
  BackendDescriptor() = default;
  BackendDescriptor(cudnnBackendDescriptorType_t type, const std::string& what);
  ~BackendDescriptor();
  BackendDescriptor(BackendDescriptor&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  BackendDescriptor& operator=(BackendDescriptor&& o) noexcept;
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  // Sets an attribute; throws naming `what_` on failure.
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* values);
  void set_desc(cudnnBackendAttributeName_t name, const BackendDescriptor& value);
  void finalize();
  // Finalizes, returning the status instead of throwing (engine configs may not apply).
  cudnnStatus_t try_finalize();

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  std::string what_;
};

// A process-wide cuDNN handle for one device, and the mutex that guards its stream.
struct CudnnHandle {
  cudnnHandle_t handle = nullptr;
  std::mutex mutex;
};
CudnnHandle& cudnn_handle(int device);

// A tensor of the operation graph: 4-D dims and strides (NCHW order of dims;
// the strides say the layout), a unique id, a data type.
BackendDescriptor make_tensor(int64_t uid, cudnnDataType_t type, const int64_t dims[4], const int64_t strides[4],
                              int64_t alignment, bool is_virtual, const std::string& what);

// A finalized plan for `ops` (operation descriptors in order) and its workspace size.
struct CudnnPlan {
  BackendDescriptor plan;
  int64_t workspace = 0;
};
// The first usable plan (Note [cuDNN plans]); false with *reason when none is.
bool build_plan(CudnnHandle& handle, const std::vector<const BackendDescriptor*>& ops, bool allow_tensor_cores,
                int64_t max_workspace, CudnnPlan* out, std::string* reason, const std::string& what);

// Runs `plan` on `stream` with the tensors `uids` at `pointers`.
void execute_plan(CudnnHandle& handle, const CudnnPlan& plan, const std::vector<int64_t>& uids,
                  std::vector<void*> pointers, void* workspace, cudaStream_t stream, const std::string& what);

}  // namespace kiln::cuda
