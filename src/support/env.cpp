// Environment knobs (see env.h for the list).
#include "support/env.h"

#include <cstdlib>
#include <thread>

namespace kiln::env {

namespace {
std::string get(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}
}  // namespace

int num_threads() {
  std::string v = get("KILN_NUM_THREADS");
  if (!v.empty()) {
    int n = std::atoi(v.c_str());
    if (n > 0) return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

std::string dump_ir() { return get("KILN_DUMP_IR"); }

bool verify_passes() {
  std::string v = get("KILN_VERIFY_PASSES");
  if (!v.empty()) return v != "0";
#ifndef NDEBUG
  return true;
#else
  return !get("CI").empty();
#endif
}

std::string log_level() {
  std::string v = get("KILN_LOG_LEVEL");
  return v.empty() ? "error" : v;
}

std::string cuda_plugin() { return get("KILN_CUDA_PLUGIN"); }

std::string kernel_cache_dir() {
  std::string v = get("KILN_CACHE_DIR");
  if (!v.empty()) return v;
  std::string home = get("HOME");
  return (home.empty() ? std::string("/tmp") : home) + "/.cache/kiln/kernels";
}

std::string nvrtc_library() { return get("KILN_NVRTC_LIBRARY"); }

}  // namespace kiln::env
