// What `kiln run` and `kiln bench` share: loading a program with its weights
// bound (from the file, or from --weights FILE.safetensors), and making inputs
// (read from .npy files, or random with a seed).
#pragma once

#include <kiln/program.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cli_args.h"

namespace kiln::cli {

// Loads args.positional[0] on --device, binds --weights, and fails (naming
// the first few) when weights are still unbound. Without a usable CUDA
// device, --device cuda fails with the load error saying why.
Program load_program(const Args& args);

// The program's inputs: from the .npy files (one per input, in order; dtype
// and shape must match the program's), or random when there are none.
std::vector<Tensor> make_inputs(const Program& program, const std::vector<std::string>& npy_files, uint64_t seed);

std::vector<TensorRef> refs(std::vector<Tensor>& tensors);
std::string shape_text(const std::vector<int64_t>& shape);  // "[2, 3]"

}  // namespace kiln::cli
