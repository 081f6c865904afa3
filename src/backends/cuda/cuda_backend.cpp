// The CUDA backend behind the runtime's Backend interface, and the plugin's
// C entry points (cuda_plugin.h). Kernels are looked up by op name in the
// table the lowering files fill (kernel_registry.h); an op without a CUDA
// kernel is unsupported with a reason, never an error at run time.
//
// Memory: the default allocator takes device memory with cudaMalloc once (the
// arena on the first call, literals at build time) and frees it with
// cudaFree; under torch the Python layer passes a CallbackAllocator instead,
// so the arena comes from torch's caching allocator (Note [Streams] in
// runtime/backend.h says how calls are ordered).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>

#include "backends/cuda/cuda_common.h"
#include "backends/cuda/cuda_graph.h"
#include "backends/cuda/cuda_plugin.h"
#include "backends/cuda/cuda_resources.h"
#include "backends/cuda/kernel_registry.h"
#include "ops/op_def.h"
#include "support/error.h"

namespace kiln::cuda {

namespace {

const KernelMap& kernels() {
  static const KernelMap map = [] {
    KernelMap m;
    register_elementwise_kernels(m);
    register_data_kernels(m);
    register_norm_kernels(m);
    register_matmul_kernels(m);
    register_attention_kernels(m);
    register_conv_kernels(m);
    register_pool_kernels(m);
    register_batch_norm_kernels(m);
    register_cumsum_kernels(m);
    return m;
  }();
  return map;
}

class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int device) : device_(device) {}
  Device device() const override { return Device{DeviceKind::cuda, device_}; }
  DeviceBuffer allocate(size_t bytes, size_t alignment) override {
    KILN_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0 && alignment <= 256,
               "CUDA allocator: alignment must be a power of two up to 256, got ", alignment);
    if (bytes == 0) return DeviceBuffer();
    DeviceGuard guard(device_);
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free error state
      fail(ErrorKind::out_of_memory, "CUDA allocator: cannot allocate ", bytes, " bytes on cuda:", device_, " (",
           cudaGetErrorString(e), ")");
    }
    const int device = device_;
    return DeviceBuffer(p, bytes, Device{DeviceKind::cuda, device}, [device](void* q) {
      int previous = -1;
      cudaGetDevice(&previous);
      if (previous != device) cudaSetDevice(device);
      cudaFree(q);
      if (previous >= 0 && previous != device) cudaSetDevice(previous);
    });
  }

 private:
  int device_;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device)
      : device_(device),
        resources_(std::make_shared<CudaResources>(device)),
        allocator_(std::make_shared<CudaAllocator>(device)) {}

  Device device() const override { return Device{DeviceKind::cuda, device_}; }

  bool supports(const Node& node, std::string* reason) const override {
    std::string why;
    try {
      if (make(node, &why) != nullptr) return true;
    } catch (const Error& e) {
      why = e.what();
    }
    if (reason) *reason = why;
    return false;
  }

  std::unique_ptr<BackendKernel> lower(const Node& node) const override {
    std::string why;
    auto kernel = make(node, &why);
    if (!kernel) fail(ErrorKind::unsupported, "node '", node.name, "' (", node.op->name, ") on cuda:", device_, ": ", why);
    return kernel;
  }

  void copy(const TensorView& dst, const TensorView& src, Stream stream) const override {
    KILN_CHECK(dst.dtype == src.dtype && dst.dims == src.dims, "copy: destination ", to_string(dst.type()),
               " does not match source ", to_string(src.type()));
    if (src.numel() == 0) return;
    DeviceGuard guard(device_);
    auto s = static_cast<cudaStream_t>(stream.handle);
    const size_t es = dtype_size(src.dtype);
    if (src.type().is_contiguous()) {
      check_cuda(cudaMemcpyAsync(dst.data, src.data, static_cast<size_t>(src.numel()) * es, cudaMemcpyDeviceToDevice, s),
                 "output copy");
      return;
    }
    CopyArgs a;
    a.space = index_space(src.dims);
    a.elem_size = static_cast<int>(es);
    a.src = src.data;
    copy_dims(a.src_strides, src.strides);
    a.dst = dst.data;
    copy_dims(a.dst_strides, contiguous_strides(dst.dims));
    check_cuda(launch_copy(a, s), "output copy");
  }

  void upload(void* dst, const void* host, size_t bytes) const override {
    if (bytes == 0) return;
    DeviceGuard guard(device_);
    check_cuda(cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice), "upload to cuda:" + std::to_string(device_));
    // From pageable memory cudaMemcpy can return before the DMA lands, and a
    // non-blocking stream (torch's side streams, a caller's) does not wait for
    // the legacy stream it ran on: wait for it here.
    check_cuda(cudaStreamSynchronize(cudaStreamLegacy), "upload to cuda:" + std::to_string(device_));
  }

  // The device-wide wait covers work on every stream (a torch stream, a
  // caller's), which a plain cudaMemcpy would not wait for.
  void download(void* host, const void* src, size_t bytes) const override {
    DeviceGuard guard(device_);
    check_cuda(cudaDeviceSynchronize(), "waiting for cuda:" + std::to_string(device_) + " before a download");
    if (bytes == 0) return;
    check_cuda(cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost), "download from cuda:" + std::to_string(device_));
  }

  std::string architecture() const override {
    int major = 0, minor = 0;
    check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_), "compute capability");
    check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_), "compute capability");
    return "sm_" + std::to_string(major) + std::to_string(minor);
  }

  std::shared_ptr<Allocator> default_allocator() const override { return allocator_; }

  std::unique_ptr<CapturedWork> capture(const std::function<void(Stream)>& body, std::string* reason) const override {
    return capture_cuda_graph(device_, body, reason);
  }
  std::unique_ptr<StreamFence> make_fence() const override { return make_cuda_fence(device_); }
  void use_allocator(std::shared_ptr<Allocator> allocator) override { resources_->set_allocator(std::move(allocator)); }
  void set_math(const MathOptions& math) override { math_ = math; }

 private:
  std::unique_ptr<BackendKernel> make(const Node& node, std::string* why) const {
    auto it = kernels().find(node.op->name);
    if (it == kernels().end()) {
      *why = "no CUDA kernel for op '" + node.op->name + "'";
      return nullptr;
    }
    DeviceGuard guard(device_);
    return it->second(node, LowerContext{device_, resources_, math_}, why);
  }

  int device_;
  std::shared_ptr<CudaResources> resources_;
  std::shared_ptr<Allocator> allocator_;
  MathOptions math_;
};

}  // namespace

}  // namespace kiln::cuda

extern "C" int kiln_cuda_abi_version() { return KILN_CUDA_ABI; }

extern "C" kiln::Backend* kiln_cuda_create_backend(int index, char* error, size_t error_len) {
  auto say = [&](const std::string& msg) {
    if (error != nullptr && error_len > 0) std::snprintf(error, error_len, "%s", msg.c_str());
  };
  try {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      say(std::string("no usable CUDA driver or device (") + cudaGetErrorString(e) + ")");
      return nullptr;
    }
    if (index < 0 || index >= count) {
      say("device index " + std::to_string(index) + " is out of range (" + std::to_string(count) +
          " CUDA devices visible)");
      return nullptr;
    }
    return new kiln::cuda::CudaBackend(index);  // owned by the caller's unique_ptr
  } catch (const std::exception& ex) {
    say(ex.what());
    return nullptr;
  }
}
