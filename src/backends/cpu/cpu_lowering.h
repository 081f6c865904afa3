// The CPU backend behind the runtime's Backend interface: lowers nodes to
// CpuKernels (make_cpu_kernel), runs them on the global thread pool, and
// copies strided tensors for output copies.
#pragma once

#include <memory>

#include "runtime/backend.h"

namespace kiln::cpu {

std::unique_ptr<Backend> make_cpu_backend();

// dst = src elementwise (bytes of dtype_size), src read through its strides,
// dst contiguous. Same dtype and dims (checked).
void strided_copy(const TensorView& dst, const TensorView& src);

}  // namespace kiln::cpu
