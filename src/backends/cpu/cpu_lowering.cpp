// CPU lowering: wraps CpuKernel in the runtime's BackendKernel.
#include "backends/cpu/cpu_lowering.h"

#include <array>
#include <cstring>

#include "backends/cpu/cpu_kernel.h"
#include "backends/cpu/strided_loop.h"
#include "ops/op_def.h"
#include "support/error.h"
#include "support/thread_pool.h"

namespace kiln::cpu {

namespace {

class CpuBackendKernel final : public BackendKernel {
 public:
  CpuBackendKernel(std::unique_ptr<CpuKernel> kernel, std::string op) : kernel_(std::move(kernel)), op_(std::move(op)) {}
  void run(std::span<const TensorView> inputs, std::span<const TensorView> outputs, Stream) const override {
    kernel_->run(inputs, outputs, CpuContext{ThreadPool::global()});
  }
  std::string describe() const override { return "cpu " + op_; }

 private:
  std::unique_ptr<CpuKernel> kernel_;
  std::string op_;
};

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device{DeviceKind::cpu, 0}; }
  bool supports(const Node& node, std::string* reason) const override { return cpu_supports(node, reason); }
  std::unique_ptr<BackendKernel> lower(const Node& node) const override {
    return std::make_unique<CpuBackendKernel>(make_cpu_kernel(node), node.op->name);
  }
  void copy(const TensorView& dst, const TensorView& src, Stream) const override { strided_copy(dst, src); }
  void upload(void* dst, const void* host, size_t bytes) const override {
    if (bytes > 0) std::memcpy(dst, host, bytes);
  }
  void download(void* host, const void* src, size_t bytes) const override {
    if (bytes > 0) std::memcpy(host, src, bytes);
  }
  std::shared_ptr<Allocator> default_allocator() const override { return cpu_allocator(); }
};

}  // namespace

void strided_copy(const TensorView& dst, const TensorView& src) {
  KILN_CHECK(dst.dtype == src.dtype && dst.dims == src.dims, "copy: destination ", to_string(dst.type()),
             " does not match source ", to_string(src.type()));
  const int64_t n = src.numel();
  if (n == 0) return;
  KILN_CHECK(dst.type().is_contiguous(), "copy: destination ", to_string(dst.type()), " is not contiguous");
  const size_t item = dtype_size(src.dtype);
  if (src.type().is_contiguous()) {
    std::memcpy(dst.data, src.data, static_cast<size_t>(n) * item);
    return;
  }
  const Dims dst_strides = contiguous_strides(dst.dims);
  auto* out = static_cast<uint8_t*>(dst.data);
  const auto* in = static_cast<const uint8_t*>(src.data);
  for_each_offset<2>(src.dims, {&dst_strides, &src.strides}, 0, n, [&](const std::array<int64_t, 2>& off) {
    std::memcpy(out + off[0] * static_cast<int64_t>(item), in + off[1] * static_cast<int64_t>(item), item);
  });
}

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace kiln::cpu
