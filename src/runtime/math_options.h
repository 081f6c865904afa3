// Note [Math modes]
// How an executable's f32 matrix products and convolutions may round. By
// default kiln computes f32 in f32. Under torch, kiln follows torch's own
// switches at compile time: torch.backends.cuda.matmul.allow_tf32 lets f32
// matrix products use TF32 tensor cores, torch.backends.cudnn.allow_tf32 (on by
// default in torch) lets f32 convolutions, so kiln's answers and speed match
// eager's. Only the CUDA backend reads them; the CPU computes f32 exactly. A
// saved program records its modes (metadata key kMathKey) and a loader uses
// them.
#pragma once

#include <string>

namespace kiln {

struct MathOptions {
  bool tf32_matmul = false;  // f32 matmul/linear may use TF32 tensor cores
  bool tf32_conv = false;    // f32 convolutions may use TF32 tensor cores

  bool operator==(const MathOptions&) const = default;
};

inline constexpr const char* kMathKey = "kiln.math";

// "tf32_matmul,tf32_conv", "tf32_conv", ... ; "" for the defaults.
std::string to_string(const MathOptions& math);
// The inverse of to_string; throws kiln::Error naming an unknown mode.
MathOptions parse_math_options(const std::string& text);

}  // namespace kiln
