// CUDA graphs and events behind the runtime's CapturedWork and StreamFence
// (Note [Captured calls] in runtime/backend.h).
//
// A call is recorded on a private stream of the capture object in
// thread-local capture mode (so an unsafe call in the recorded work, such as
// a cudaMalloc or a host sync, fails the capture instead of corrupting it;
// the executable then runs uncaptured and logs why), instantiated once, and
// replayed with cudaGraphLaunch on the caller's stream. update() re-records
// and applies the new graph with cudaGraphExecUpdate (kernel parameters and
// copy addresses change in place; no re-instantiation).
#pragma once

#include <memory>
#include <string>

#include "runtime/backend.h"

namespace kiln::cuda {

std::unique_ptr<CapturedWork> capture_cuda_graph(int device, const std::function<void(Stream)>& body,
                                                 std::string* reason);
std::unique_ptr<StreamFence> make_cuda_fence(int device);

}  // namespace kiln::cuda
