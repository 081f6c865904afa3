// CPU and callback allocators.
#include "runtime/allocator.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "support/error.h"

namespace kiln {

namespace {
std::atomic<size_t> host_in_use{0};
std::atomic<size_t> host_limit{0};
}  // namespace

void set_host_memory_limit(size_t bytes) { host_limit.store(bytes); }

size_t host_memory_in_use() { return host_in_use.load(); }

DeviceBuffer CpuAllocator::allocate(size_t bytes, size_t alignment) {
  KILN_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0, "allocator: alignment must be a power of two, got ",
             alignment);
  if (bytes == 0) return DeviceBuffer();
  alignment = std::max(alignment, sizeof(void*));
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;  // aligned_alloc needs a multiple
  const size_t held = host_in_use.fetch_add(rounded) + rounded;
  const size_t limit = host_limit.load();
  if (limit != 0 && held > limit) {
    host_in_use.fetch_sub(rounded);
    fail(ErrorKind::out_of_memory, "allocator: cannot allocate ", bytes, " bytes of host memory: kiln's host memory limit is ",
         limit, " bytes and ", held - rounded, " are in use");
  }
  void* p = std::aligned_alloc(alignment, rounded);
  if (p == nullptr) {
    host_in_use.fetch_sub(rounded);
    fail(ErrorKind::out_of_memory, "allocator: cannot allocate ", bytes, " bytes of host memory");
  }
  return DeviceBuffer(p, bytes, device(), [rounded](void* q) {
    std::free(q);
    host_in_use.fetch_sub(rounded);
  });
}

DeviceBuffer CallbackAllocator::allocate(size_t bytes, size_t alignment) {
  if (bytes == 0) return DeviceBuffer();
  DeviceBuffer b = fn_(bytes, alignment);
  KILN_CHECK_KIND(out_of_memory, b.data() != nullptr && b.bytes() >= bytes, "allocator callback returned ",
                  b.bytes(), " bytes at ", b.data(), " for a request of ", bytes);
  KILN_CHECK(reinterpret_cast<uintptr_t>(b.data()) % alignment == 0, "allocator callback returned memory at ",
             b.data(), ", not aligned to ", alignment);
  KILN_CHECK(b.device() == device_, "allocator callback returned memory on ", to_string(b.device()), ", expected ",
             to_string(device_));
  return b;
}

std::shared_ptr<Allocator> cpu_allocator() {
  static const std::shared_ptr<Allocator> instance = std::make_shared<CpuAllocator>();
  return instance;
}

}  // namespace kiln
