// NVRTC through dlopen (nvrtc_compiler.h). The few entry points kiln uses are
// declared here with NVRTC's C signatures (its result codes are ints, its
// program an opaque pointer), so no NVRTC header is needed to build.
#include "backends/cuda/nvrtc_compiler.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <sstream>

#include "support/env.h"
#include "support/error.h"

#ifndef KILN_NVRTC_DIRS
#define KILN_NVRTC_DIRS ""  // ':'-separated folders found at configure time
#endif

namespace kiln::cuda {

namespace {

using Program = void*;
struct Nvrtc {
  void* handle = nullptr;
  std::string error;
  const char* (*get_error_string)(int) = nullptr;
  int (*version)(int*, int*) = nullptr;
  int (*create)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*destroy)(Program*) = nullptr;
  int (*compile)(Program, int, const char* const*) = nullptr;
  int (*log_size)(Program, size_t*) = nullptr;
  int (*log)(Program, char*) = nullptr;
  int (*cubin_size)(Program, size_t*) = nullptr;
  int (*cubin)(Program, char*) = nullptr;
};

std::atomic<int64_t> g_compiles{0};

std::string beside_plugin() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&nvrtc_available), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string self = info.dli_fname;
  size_t slash = self.rfind('/');
  return slash == std::string::npos ? "" : self.substr(0, slash + 1) + "../nvidia/cu13/lib";
}

// NVRTC opens libnvrtc-builtins.so.<version> by name at its first compile; a
// libnvrtc found by path (not on the loader's path) would not find it, so
// the builtins beside it are loaded first (the loader then matches the name).
void preload_builtins(void* handle) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr) return;
  std::filesystem::path dir = std::filesystem::path(map->l_name).parent_path();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("libnvrtc-builtins.so.", 0) == 0) dlopen(entry.path().c_str(), RTLD_NOW | RTLD_LOCAL);
  }
}

const Nvrtc& nvrtc() {
  static Nvrtc n;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    if (std::string path = env::nvrtc_library(); !path.empty()) {
      candidates.push_back(path);
    } else {
      candidates = {"libnvrtc.so.13", "libnvrtc.so.12"};
      std::string dirs = KILN_NVRTC_DIRS;
      std::string plugin_dir = beside_plugin();
      if (!plugin_dir.empty()) dirs += (dirs.empty() ? "" : ":") + plugin_dir;
      std::stringstream split(dirs);
      for (std::string dir; std::getline(split, dir, ':');)
        if (!dir.empty()) candidates.push_back(dir + "/libnvrtc.so.13");
    }
    std::string tried;
    for (const std::string& path : candidates) {
      dlerror();
      n.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (n.handle != nullptr) break;
      const char* e = dlerror();
      tried += str_cat(tried.empty() ? "" : "; ", e ? e : path + ": not found");
    }
    if (n.handle == nullptr) {
      n.error = "NVRTC (libnvrtc.so.13) could not be loaded; set KILN_NVRTC_LIBRARY to its path (tried: " + tried + ")";
      return;
    }
    preload_builtins(n.handle);
    auto sym = [&](const char* name) { return dlsym(n.handle, name); };
    n.get_error_string = reinterpret_cast<decltype(n.get_error_string)>(sym("nvrtcGetErrorString"));
    n.version = reinterpret_cast<decltype(n.version)>(sym("nvrtcVersion"));
    n.create = reinterpret_cast<decltype(n.create)>(sym("nvrtcCreateProgram"));
    n.destroy = reinterpret_cast<decltype(n.destroy)>(sym("nvrtcDestroyProgram"));
    n.compile = reinterpret_cast<decltype(n.compile)>(sym("nvrtcCompileProgram"));
    n.log_size = reinterpret_cast<decltype(n.log_size)>(sym("nvrtcGetProgramLogSize"));
    n.log = reinterpret_cast<decltype(n.log)>(sym("nvrtcGetProgramLog"));
    n.cubin_size = reinterpret_cast<decltype(n.cubin_size)>(sym("nvrtcGetCUBINSize"));
    n.cubin = reinterpret_cast<decltype(n.cubin)>(sym("nvrtcGetCUBIN"));
    if (!n.get_error_string || !n.version || !n.create || !n.destroy || !n.compile || !n.log_size || !n.log ||
        !n.cubin_size || !n.cubin) {
      n.error = "the NVRTC library found lacks nvrtcGetCUBIN and friends (NVRTC 11.1 or newer is needed)";
      n.handle = nullptr;
    }
  });
  return n;
}

const Nvrtc& require() {
  const Nvrtc& n = nvrtc();
  if (n.handle == nullptr) fail(ErrorKind::unsupported, n.error);
  return n;
}

}  // namespace

bool nvrtc_available(std::string* reason) {
  const Nvrtc& n = nvrtc();
  if (n.handle == nullptr && reason != nullptr) *reason = n.error;
  return n.handle != nullptr;
}

std::string nvrtc_version() {
  const Nvrtc& n = require();
  int major = 0, minor = 0;
  n.version(&major, &minor);
  return str_cat(major, ".", minor);
}

std::string nvrtc_compile_cubin(const std::string& source, const std::vector<NvrtcHeader>& headers, int arch,
                                const std::string& program_name) {
  const Nvrtc& n = require();
  std::vector<const char*> header_text, header_names;
  for (const NvrtcHeader& h : headers) {
    header_text.push_back(h.text.c_str());
    header_names.push_back(h.name.c_str());
  }
  Program prog = nullptr;
  int rc = n.create(&prog, source.c_str(), program_name.c_str(), static_cast<int>(headers.size()), header_text.data(),
                    header_names.data());
  KILN_CHECK_KIND(runtime, rc == 0, "nvrtcCreateProgram failed for ", program_name, ": ", n.get_error_string(rc));
  const std::string arch_flag = str_cat("--gpu-architecture=sm_", arch);
  const char* options[] = {arch_flag.c_str(), "-std=c++17", "--fmad=true"};
  ++g_compiles;
  rc = n.compile(prog, 3, options);
  std::string log;
  size_t log_bytes = 0;
  if (n.log_size(prog, &log_bytes) == 0 && log_bytes > 1) {
    log.resize(log_bytes);
    n.log(prog, log.data());
    log.resize(log_bytes - 1);
  }
  std::string cubin;
  if (rc == 0) {
    size_t bytes = 0;
    rc = n.cubin_size(prog, &bytes);
    if (rc == 0) {
      cubin.resize(bytes);
      rc = n.cubin(prog, cubin.data());
    }
  }
  n.destroy(&prog);
  KILN_CHECK_KIND(runtime, rc == 0 && !cubin.empty(), "NVRTC could not compile ", program_name, " for sm_", arch, " (",
                  n.get_error_string(rc), "):\n", log, "\n--- source ---\n", source);
  return cubin;
}

int64_t nvrtc_compile_count() { return g_compiles.load(); }

}  // namespace kiln::cuda
