// Backend selection by device.
#include "runtime/backend.h"

#include "backends/cpu/cpu_lowering.h"
#include "support/error.h"

namespace kiln {

std::unique_ptr<Backend> make_cuda_backend(int index);  // cuda_plugin_loader.cpp

std::unique_ptr<Backend> make_backend(Device device) {
  if (device.kind == DeviceKind::cpu) return cpu::make_cpu_backend();
  if (device.kind == DeviceKind::cuda) return make_cuda_backend(device.index);
  fail(ErrorKind::unsupported, "no backend for device ", to_string(device), " in this build");
}

}  // namespace kiln
