// Looks up CPU kernel factories by op name.
#include "backends/cpu/kernel_registry.h"

#include "ops/op_def.h"
#include "support/error.h"

namespace kiln::cpu {

namespace {
const internal::KernelMap& kernels() {
  static const internal::KernelMap map = [] {
    internal::KernelMap m;
    internal::register_elementwise_kernels(m);
    internal::register_reduction_kernels(m);
    internal::register_linalg_kernels(m);
    internal::register_norm_kernels(m);
    internal::register_pool_kernels(m);
    internal::register_data_kernels(m);
    internal::register_attention_kernels(m);
    internal::register_fused_kernels(m);
    return m;
  }();
  return map;
}
}  // namespace

bool cpu_has_kernel(std::string_view op_name) { return kernels().find(op_name) != kernels().end(); }

bool cpu_supports(const Node& node, std::string* reason) {
  auto it = kernels().find(node.op->name);
  if (it == kernels().end()) {
    if (reason) *reason = "no CPU kernel for op '" + node.op->name + "'";
    return false;
  }
  std::string why;
  if (it->second(node, &why) == nullptr) {
    if (reason) *reason = why;
    return false;
  }
  return true;
}

std::unique_ptr<CpuKernel> make_cpu_kernel(const Node& node) {
  auto it = kernels().find(node.op->name);
  if (it == kernels().end()) fail(ErrorKind::unsupported, "node '", node.name, "': no CPU kernel for op '", node.op->name, "'");
  std::string why;
  auto kernel = it->second(node, &why);
  if (!kernel) fail(ErrorKind::unsupported, "node '", node.name, "' (", node.op->name, "): ", why);
  return kernel;
}

}  // namespace kiln::cpu
