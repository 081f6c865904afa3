// Device names.
#include "runtime/tensor_view.h"

#include <string>

namespace kiln {

std::string to_string(Device d) {
  return d.kind == DeviceKind::cpu ? std::string("cpu") : "cuda:" + std::to_string(d.index);
}

}  // namespace kiln
