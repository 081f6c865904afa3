// Host-side helpers of the CUDA backend: error checks that become
// kiln::Error, a device guard, the base class of CUDA kernels, and the
// conversions from TensorViews to the launch structs of launch.h.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <span>
#include <string>

#include "backends/cuda/launch.h"
#include "ir/graph.h"
#include "ops/op_def.h"
#include "runtime/backend.h"

namespace kiln::cuda {

// Throws kiln::Error(runtime) "<what>: <CUDA's message>" unless e is success.
void check_cuda(cudaError_t e, const std::string& what);

// Makes `device` current for its lifetime (a host-side call; never synchronizes).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  int device_ = 0;
};

class CudaResources;  // cuda_resources.h

// What a kernel factory gets besides the node.
struct LowerContext {
  int device = 0;
  std::shared_ptr<CudaResources> resources;
  MathOptions math;  // Note [Math modes] (runtime/math_options.h)
};

// The base of every CUDA kernel: makes the device current, converts the
// stream, names the node in errors.
class CudaKernel : public BackendKernel {
 public:
  CudaKernel(const Node& node, int device) : node_(node.name), op_(node.op->name), device_(device) {}
  void run(std::span<const TensorView> inputs, std::span<const TensorView> outputs, Stream stream) const final {
    DeviceGuard guard(device_);
    launch(inputs, outputs, static_cast<cudaStream_t>(stream.handle));
  }
  std::string describe() const override { return "cuda " + op_; }

 protected:
  virtual void launch(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
                      cudaStream_t stream) const = 0;
  // Throws naming the node unless the launch succeeded.
  void check_launch(cudaError_t e) const;
  const std::string& node_name() const { return node_; }

 private:
  std::string node_, op_;
  int device_;
};

// Factories return nullptr with *reason set when the node is not supported.
using CudaKernelFactory = std::unique_ptr<BackendKernel> (*)(const Node& node, const LowerContext& ctx,
                                                             std::string* reason);

// ---- launch structs from views -----------------------------------------------

// Whether dims fit a kernel's index space (rank <= kMaxRank); else sets reason.
bool fits_rank(const Node& node, std::string* reason);
IndexSpace index_space(const Dims& dims);
void copy_dims(int64_t* dst, const Dims& src);
// `view` read over `out_dims` (broadcast strides).
Operand operand_over(const TensorView& view, const Dims& out_dims);
// dst (strided) = src (strided) over dims, for launch_copy.
CopyArgs copy_args(const Dims& dims, const void* src, const Dims& src_strides, void* dst, const Dims& dst_strides,
                   size_t elem_size);
Compute compute_of(DType d);  // f32 for f16/bf16/f32, f64, else i64
// A row space over `axes` (sorted) of `in` (strided) and `out` (same dims).
RowSpace row_space(const Dims& dims, const Dims& in_strides, const Dims& out_strides, std::span<const int64_t> axes);

}  // namespace kiln::cuda
