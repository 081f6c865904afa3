// A small .npy reader and writer (NumPy's format, versions 1 to 3) for the
// kiln command's inputs and outputs. Reading checks everything against the
// bytes it has: magic, header length, the header dict (descr, fortran_order,
// shape), that the data is exactly numel * itemsize bytes; a bad file is a
// std::runtime_error naming the file and what is wrong.
#pragma once

#include <kiln/program.h>

#include <string>
#include <string_view>

namespace kiln::cli {

// Reads a C-ordered .npy array. bf16 has no NumPy dtype: it is written as
// '<u2' (the raw 16-bit patterns), and '<u2' is read back as bf16.
Tensor read_npy(const std::string& path);
void write_npy(const std::string& path, const Tensor& tensor);

// Parses an in-memory .npy image (the file reader's core; `name` is for errors).
Tensor parse_npy(std::string_view bytes, const std::string& name);

// The NumPy descr for an element type ("<f4", "|b1", ...).
std::string npy_descr(ElementType type);

}  // namespace kiln::cli
