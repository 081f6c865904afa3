// The allocator interface: where an executable's arena (and, later, kernel
// workspaces) come from. Memory travels with the function that frees it
// (c10's idea of a data pointer plus deleter), so an arena obtained from
// torch's caching allocator through a callback is released back to torch,
// and one from kiln's CPU allocator is freed by kiln.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "runtime/tensor_view.h"

namespace kiln {

// Owned device memory: released by its deleter when destroyed. Move-only.
class DeviceBuffer {
 public:
  using Deleter = std::function<void(void*)>;
  DeviceBuffer() = default;
  DeviceBuffer(void* data, size_t bytes, Device device, Deleter deleter)
      : data_(data), bytes_(bytes), device_(device), deleter_(std::move(deleter)) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    DeviceBuffer(std::move(other)).swap(*this);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (data_ != nullptr && deleter_) deleter_(data_);
  }

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void swap(DeviceBuffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    std::swap(device_, other.device_);
    std::swap(deleter_, other.deleter_);
  }
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  Deleter deleter_;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  // `bytes` of memory aligned to `alignment` (a power of two). Zero bytes give
  // an empty buffer. Throws kiln::Error(out_of_memory) on failure.
  virtual DeviceBuffer allocate(size_t bytes, size_t alignment) = 0;
};

// Host memory from the C library's aligned allocation; thread-safe. Counts
// the bytes it has handed out and not yet freed (process-wide), and refuses
// an allocation past the host memory limit with an out_of_memory error.
class CpuAllocator final : public Allocator {
 public:
  Device device() const override { return Device{DeviceKind::cpu, 0}; }
  DeviceBuffer allocate(size_t bytes, size_t alignment) override;
};

// Caps the host memory kiln's CPU allocator may hold at once (0: no cap, the
// default). Lets tests inject out-of-memory faults at any point of a compile
// or a call; memory already held is not affected.
void set_host_memory_limit(size_t bytes);
// Bytes the CPU allocator has handed out and not yet freed, process-wide.
size_t host_memory_in_use();

// Forwards to a function (the Python layer passes one that allocates from
// torch's caching allocator, so torch's memory statistics include kiln).
class CallbackAllocator final : public Allocator {
 public:
  using AllocateFn = std::function<DeviceBuffer(size_t bytes, size_t alignment)>;
  CallbackAllocator(Device device, AllocateFn fn) : device_(device), fn_(std::move(fn)) {}
  Device device() const override { return device_; }
  DeviceBuffer allocate(size_t bytes, size_t alignment) override;

 private:
  Device device_;
  AllocateFn fn_;
};

// The process-wide CPU allocator.
std::shared_ptr<Allocator> cpu_allocator();

}  // namespace kiln
