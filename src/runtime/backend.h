// The backend interface: what the executable needs from a device. A backend
// lowers each compute node to a kernel, copies tensors (for output copies),
// and names the allocator its memory comes from. The CPU backend lives in
// backends/cpu/cpu_lowering.h; the CUDA backend is a plugin (libkiln_cuda.so,
// src/backends/cuda/) that make_backend loads with dlopen, so the core has no
// link-time CUDA dependency (runtime/cuda_plugin_loader.cpp says why and how).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>

#include "ir/graph.h"
#include "runtime/allocator.h"
#include "runtime/math_options.h"
#include "runtime/tensor_view.h"

namespace kiln {

// Note [Streams]
// The queue a call's device work goes on. For CUDA, `handle` is the caller's
// cudaStream_t (under torch: torch.cuda.current_stream().cuda_stream); null is
// the default stream. Kernels only enqueue work on it and never synchronize
// the device, so a call returns before its results are ready, exactly like a
// torch op. The CPU backend runs synchronously and ignores it.
struct Stream {
  void* handle = nullptr;
};

// One lowered node, bound to data pointers at each call. Inputs may be
// strided; outputs are contiguous and pre-allocated.
class BackendKernel {
 public:
  virtual ~BackendKernel() = default;
  virtual void run(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
                   Stream stream) const = 0;
  virtual std::string describe() const = 0;  // e.g. "cpu add"
};

// Note [Captured calls]
// A backend that can record a call's device work and replay it (CUDA graphs)
// returns a CapturedWork from Backend::capture: `body` enqueues the whole
// call on the stream it is given, and nothing runs while it is recorded.
// replay() enqueues the recorded work on the caller's stream; update()
// re-records `body` (new pointers, same kernels) into the same replayable
// object, returning false (with the reason) when it cannot, in which case the
// caller captures anew.
class CapturedWork {
 public:
  virtual ~CapturedWork() = default;
  virtual void replay(Stream stream) = 0;
  virtual bool update(const std::function<void(Stream)>& body, std::string* reason) = 0;
};

// Orders one executable's calls across streams: record() marks the end of a
// call on its stream; wait() makes another stream's later work wait for the
// last mark, on the device (never a host wait).
class StreamFence {
 public:
  virtual ~StreamFence() = default;
  virtual void record(Stream stream) = 0;
  virtual void wait(Stream stream) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  // Whether lower(node) can succeed; on false, `reason` says why.
  virtual bool supports(const Node& node, std::string* reason) const = 0;
  // Throws kiln::Error(unsupported) naming the node when it cannot.
  virtual std::unique_ptr<BackendKernel> lower(const Node& node) const = 0;
  // Copies src (any strides) into dst (contiguous); same dtype and dims.
  virtual void copy(const TensorView& dst, const TensorView& src, Stream stream) const = 0;
  // Copies `bytes` of host memory to `dst` (this backend's memory) and waits
  // for it: for build-time uploads (literals), never in the call path.
  virtual void upload(void* dst, const void* host, size_t bytes) const = 0;
  // Waits until every call enqueued on this backend's device has finished (any
  // stream), then copies `bytes` of `src` (this backend's memory) to the host:
  // for saving weights and host-staged calls, never in the call path.
  virtual void download(void* host, const void* src, size_t bytes) const = 0;
  // The device's architecture as saved programs record it ("sm_90"); "" for the CPU.
  virtual std::string architecture() const { return ""; }
  virtual std::shared_ptr<Allocator> default_allocator() const = 0;
  // Records `body` for replay (Note [Captured calls]); null with `reason` set
  // when this backend cannot, or the work cannot be recorded.
  virtual std::unique_ptr<CapturedWork> capture(const std::function<void(Stream)>& body, std::string* reason) const {
    *reason = "this backend does not capture calls";
    return nullptr;
  }
  // Workspaces the kernels lowered from now on need come from `allocator` (the
  // executable's, so that torch's allocator accounts for them under torch).
  virtual void use_allocator(std::shared_ptr<Allocator> allocator) {}
  // A fence for ordering calls across streams; null where calls are synchronous (CPU).
  virtual std::unique_ptr<StreamFence> make_fence() const { return nullptr; }
  // The math modes the kernels lowered from now on may use (Note [Math modes]); the CPU ignores them.
  virtual void set_math(const MathOptions& math) {}
};

// The backend for `device`; throws kiln::Error(unsupported) when kiln has none
// (for CUDA: the plugin is missing, fails to load, or sees no such device).
std::unique_ptr<Backend> make_backend(Device device);

// Whether make_backend(Device{cuda, 0}) can succeed: the CUDA plugin loads and
// sees at least one device. On false, `reason` (if given) says why.
bool cuda_available(std::string* reason = nullptr);

}  // namespace kiln
