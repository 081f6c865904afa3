// What the files of the nanobind extension kiln._kiln share: module.cpp
// defines the module (graphs, compile, artifacts, folds) and calls the binders
// declared here; executable_bindings.cpp binds Executable. Only src/python
// includes nanobind.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>

#include "runtime/allocator.h"

namespace kiln::python {

// The Executable class and its calls (executable_bindings.cpp).
void bind_executable(nanobind::module_& m);

// A CallbackAllocator over a Python callable allocator(nbytes, alignment) ->
// (address, owner) (kiln.executable passes one that allocates from torch's
// caching allocator); `owner` is kept alive until kiln frees the memory.
std::shared_ptr<Allocator> python_allocator(Device device, nanobind::object fn);

}  // namespace kiln::python
