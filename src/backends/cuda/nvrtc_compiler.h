// NVRTC, opened with dlopen at first use: CUDA C++ source to a CUBIN for one
// exact architecture (sm_XY). No link-time dependency, so the plugin builds
// and loads where NVRTC is missing; a compile there fails with an error that
// says where NVRTC was looked for. Pure C++ (no CUDA headers): the C++ tests
// use it without a GPU.
//
// Where: $KILN_NVRTC_LIBRARY if set; else libnvrtc.so.13 (.12) from the
// dynamic loader's path (torch's CUDA wheels load it), the toolkit's and
// KILN_CUDA_LIB_HINTS' lib folders found at configure time, and the wheel's
// nvidia/cu13/lib beside the plugin.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::cuda {

struct NvrtcHeader {
  std::string name, text;  // #include "name" resolves to text
};

// Whether NVRTC can be loaded; on false `reason` says why.
bool nvrtc_available(std::string* reason = nullptr);
// NVRTC's version as "major.minor"; throws kiln::Error(unsupported) without NVRTC.
std::string nvrtc_version();
// Compiles `source` to a CUBIN for sm_<arch> (e.g. 90). Throws
// kiln::Error(unsupported) without NVRTC, kiln::Error(runtime) with NVRTC's
// log when the source does not compile. Counted in nvrtc_compile_count().
std::string nvrtc_compile_cubin(const std::string& source, const std::vector<NvrtcHeader>& headers, int arch,
                                const std::string& program_name);
// NVRTC compilations run by this process (successful or not).
int64_t nvrtc_compile_count();

}  // namespace kiln::cuda
