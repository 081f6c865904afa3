// The CPU backend's kernel interface. Lowering makes one CpuKernel per node,
// knowing the node's static types; run() is then called once per execution
// with views whose data pointers are bound for that call. Inputs may be
// strided (broadcast or views); outputs are contiguous and pre-allocated.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ir/graph.h"
#include "runtime/tensor_view.h"
#include "support/thread_pool.h"

namespace kiln::cpu {

struct CpuContext {
  ThreadPool& pool;
};

class CpuKernel {
 public:
  virtual ~CpuKernel() = default;
  virtual void run(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
                   const CpuContext& ctx) const = 0;
  // Scratch bytes run() needs (passed through the arena later); 0 by default.
  virtual size_t workspace_bytes() const { return 0; }
};

// Factory for one op: returns nullptr (and sets *reason) when this node's
// dtypes or attributes are not supported.
using CpuKernelFactory = std::unique_ptr<CpuKernel> (*)(const Node& node, std::string* reason);

// The kernel for `node`; throws kiln::Error(unsupported) naming the node when none exists.
std::unique_ptr<CpuKernel> make_cpu_kernel(const Node& node);
// Whether the CPU backend can run `node`; on false, `reason` says why.
bool cpu_supports(const Node& node, std::string* reason);
// Whether the CPU backend has a kernel for op `op_name` at all (docs/ops.md).
bool cpu_has_kernel(std::string_view op_name);

}  // namespace kiln::cpu
