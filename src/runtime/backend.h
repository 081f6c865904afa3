// The backend interface: what the executable needs from a device. A backend
// lowers each compute node to a kernel, copies tensors (for output copies),
// and names the allocator its memory comes from. The CPU backend lives in
// backends/cpu/cpu_lowering.h; a CUDA backend plugs in behind make_backend.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "ir/graph.h"
#include "runtime/allocator.h"
#include "runtime/tensor_view.h"

namespace kiln {

// One lowered node, bound to data pointers at each call. Inputs may be
// strided; outputs are contiguous and pre-allocated.
class BackendKernel {
 public:
  virtual ~BackendKernel() = default;
  virtual void run(std::span<const TensorView> inputs, std::span<const TensorView> outputs) const = 0;
  virtual std::string describe() const = 0;  // e.g. "cpu add"
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
  virtual void copy(const TensorView& dst, const TensorView& src) const = 0;
  virtual std::shared_ptr<Allocator> default_allocator() const = 0;
};

// The backend for `device`; throws kiln::Error(unsupported) when kiln has none.
std::unique_ptr<Backend> make_backend(Device device);

}  // namespace kiln
