// Finds and loads the CUDA backend plugin (libkiln_cuda.so).
//
// Why a plugin: kiln's core (and the Python module built on it) must import
// and run on machines without CUDA, without a driver or without a GPU, and one
// wheel must serve both. Linking the core against libcudart/cuBLASLt would
// make every import fail where those libraries are missing. So everything
// CUDA lives in a shared library that the core opens with dlopen the first
// time a CUDA device is asked for; its C entry points (backends/cuda/
// cuda_plugin.h) hand back a kiln::Backend. A missing plugin, library or
// device becomes a kiln::Error(unsupported) with the loader's reason, never a
// crash, and cuda_available() reports the same reason without throwing.
//
// Where: $KILN_CUDA_PLUGIN if set; else next to the file holding this code
// (the test program or the Python module _kiln.so, which the build and the
// wheel place beside libkiln_cuda.so); else the dynamic loader's search path.
// The handle is never closed: backends and their kernels live in it.
#include <dlfcn.h>

#include <mutex>
#include <string>
#include <vector>

#include "backends/cuda/cuda_plugin.h"
#include "runtime/backend.h"
#include "support/env.h"
#include "support/error.h"

namespace kiln {

namespace {

struct Plugin {
  void* handle = nullptr;
  std::string error;  // why it is not usable, when handle is null
  int (*device_count)(const char**) = nullptr;
  Backend* (*create)(int, char*, size_t) = nullptr;
};

std::string beside_this_library(const char* file) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuda_available), &info) == 0 || info.dli_fname == nullptr) return file;
  std::string self = info.dli_fname;
  size_t slash = self.rfind('/');
  return slash == std::string::npos ? file : self.substr(0, slash + 1) + file;
}

const Plugin& plugin() {
  static Plugin p;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* kName = "libkiln_cuda.so";
    std::string tried;
    std::string env_path = env::cuda_plugin();
    std::vector<std::string> candidates =
        env_path.empty() ? std::vector<std::string>{beside_this_library(kName), kName} : std::vector<std::string>{env_path};
    for (const std::string& path : candidates) {
      dlerror();
      p.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (p.handle != nullptr) break;
      const char* e = dlerror();
      tried += str_cat(tried.empty() ? "" : "; ", path, ": ", e ? e : "not found");
    }
    if (p.handle == nullptr) {
      p.error = "the CUDA plugin could not be loaded (" + tried + ")";
      return;
    }
    auto abi = reinterpret_cast<int (*)()>(dlsym(p.handle, "kiln_cuda_abi_version"));
    p.device_count = reinterpret_cast<int (*)(const char**)>(dlsym(p.handle, "kiln_cuda_device_count"));
    p.create = reinterpret_cast<Backend* (*)(int, char*, size_t)>(dlsym(p.handle, "kiln_cuda_create_backend"));
    if (abi == nullptr || p.device_count == nullptr || p.create == nullptr || abi() != KILN_CUDA_ABI) {
      p.error = str_cat("the CUDA plugin does not match this kiln build (ABI ", abi ? abi() : -1, ", expected ",
                        KILN_CUDA_ABI, ")");
      p.handle = nullptr;  // leaked on purpose: unloading code that may have run is unsafe
    }
  });
  return p;
}

}  // namespace

bool cuda_available(std::string* reason) {
  const Plugin& p = plugin();
  if (p.handle == nullptr) {
    if (reason) *reason = p.error;
    return false;
  }
  const char* error = nullptr;
  int n = p.device_count(&error);
  if (n <= 0) {
    if (reason) *reason = n < 0 ? str_cat("no usable CUDA driver or device (", error ? error : "?", ")") : "no CUDA device is visible";
    return false;
  }
  return true;
}

std::unique_ptr<Backend> make_cuda_backend(int index) {
  const Plugin& p = plugin();
  if (p.handle == nullptr) fail(ErrorKind::unsupported, "no backend for device cuda:", index, ": ", p.error);
  char error[512] = {0};
  Backend* b = p.create(index, error, sizeof(error));
  if (b == nullptr) fail(ErrorKind::unsupported, "no backend for device cuda:", index, ": ", error);
  return std::unique_ptr<Backend>(b);
}

}  // namespace kiln
