// Math modes as text, for saved programs' metadata (math_options.h).
#include "runtime/math_options.h"

#include "support/error.h"

namespace kiln {

std::string to_string(const MathOptions& math) {
  std::string out;
  if (math.tf32_matmul) out += "tf32_matmul";
  if (math.tf32_conv) out += out.empty() ? "tf32_conv" : ",tf32_conv";
  return out;
}

MathOptions parse_math_options(const std::string& text) {
  MathOptions math;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string mode = text.substr(at, end - at);
    if (mode == "tf32_matmul") {
      math.tf32_matmul = true;
    } else if (mode == "tf32_conv") {
      math.tf32_conv = true;
    } else {
      fail(ErrorKind::invalid_argument, "unknown math mode '", mode, "' in '", text,
           "' (known: tf32_matmul, tf32_conv)");
    }
    at = end + 1;
  }
  return math;
}

}  // namespace kiln
