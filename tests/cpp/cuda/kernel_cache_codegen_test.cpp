// The compiled-kernel cache (backends/cuda/kernel_cache.h): keys are stable
// and change with everything that decides the machine code; disk files are
// read back only when intact and for their key; a second compile of the same
// source is served from disk with no NVRTC run, and a corrupt file is
// recompiled and rewritten; requests compile side by side on the pool, one
// compile per key, and a failed compile is reported and not kept; a forked
// child compiles afresh instead of waiting on the parent's threads.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "backends/cuda/fused_codegen.h"
#include "backends/cuda/kernel_cache.h"
#include "support/error.h"

namespace kiln::cuda {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("kiln_cache_test_" + std::to_string(getpid()) + "_" +
                                        std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void spit(const fs::path& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << data;
}

TEST(KernelCache, KeyIsStableAndCoversEveryInput) {
  const std::vector<NvrtcHeader> h = {{"a.h", "int a;"}};
  const std::string k = kernel_cache_key("src", h, 90, "13.0");
  EXPECT_EQ(k, kernel_cache_key("src", h, 90, "13.0"));
  EXPECT_EQ(k.size(), 32u);
  EXPECT_NE(k, kernel_cache_key("src2", h, 90, "13.0"));
  EXPECT_NE(k, kernel_cache_key("src", h, 89, "13.0"));
  EXPECT_NE(k, kernel_cache_key("src", h, 90, "13.1"));
  EXPECT_NE(k, kernel_cache_key("src", {{"a.h", "int b;"}}, 90, "13.0"));
  EXPECT_NE(kernel_cache_key("ab", {{"c", ""}}, 90, "13.0"), kernel_cache_key("a", {{"bc", ""}}, 90, "13.0"));
}

TEST(KernelCache, FilesRoundTripAndDamagedOnesAreIgnored) {
  TempDir dir;
  const fs::path file = dir.path / "k.cubin";
  const std::string payload = std::string("\x7f" "ELF", 4) + std::string(1000, 'x');
  ASSERT_TRUE(write_cache_file(file.string(), "key1", payload));
  EXPECT_EQ(read_cache_file(file.string(), "key1").value_or(""), payload);
  EXPECT_FALSE(read_cache_file(file.string(), "key2").has_value());  // another key
  for (const fs::path& p : fs::directory_iterator(dir.path)) EXPECT_EQ(p.filename(), "k.cubin");  // no temp left
  const std::string good = slurp(file);
  spit(file, good.substr(0, good.size() - 10));  // short
  EXPECT_FALSE(read_cache_file(file.string(), "key1").has_value());
  std::string flipped = good;
  flipped[flipped.size() - 3] ^= 0x20;  // corrupt payload
  spit(file, flipped);
  EXPECT_FALSE(read_cache_file(file.string(), "key1").has_value());
  spit(file, "");  // empty
  EXPECT_FALSE(read_cache_file(file.string(), "key1").has_value());
  EXPECT_FALSE(read_cache_file((dir.path / "missing").string(), "key1").has_value());
}

TEST(KernelCache, SecondCompileComesFromDiskAndCorruptFilesAreRewritten) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  TempDir dir;
  ASSERT_EQ(setenv("KILN_CACHE_DIR", dir.path.c_str(), 1), 0);
  const std::string src = "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] *= 2.0f; }  // " +
                          std::to_string(getpid());
  const std::vector<NvrtcHeader> headers;
  kernel_cache_forget_memory();
  const KernelCacheStats s0 = kernel_cache_stats();
  auto first = cached_cubin(src, headers, 90, "t.cu");
  EXPECT_EQ(kernel_cache_stats().nvrtc_compiles, s0.nvrtc_compiles + 1);
  EXPECT_EQ(kernel_cache_stats().disk_writes, s0.disk_writes + 1);

  auto again = cached_cubin(src, headers, 90, "t.cu");  // memory
  EXPECT_EQ(*again, *first);
  EXPECT_EQ(kernel_cache_stats().memory_hits, s0.memory_hits + 1);

  kernel_cache_forget_memory();
  auto from_disk = cached_cubin(src, headers, 90, "t.cu");
  EXPECT_EQ(*from_disk, *first);
  EXPECT_EQ(kernel_cache_stats().nvrtc_compiles, s0.nvrtc_compiles + 1);  // no NVRTC run
  EXPECT_EQ(kernel_cache_stats().disk_hits, s0.disk_hits + 1);

  // Corrupt the one file: it is ignored, recompiled and rewritten.
  std::vector<fs::path> files(fs::directory_iterator(dir.path), fs::directory_iterator());
  ASSERT_EQ(files.size(), 1u);
  std::string bytes = slurp(files[0]);
  bytes[bytes.size() / 2] ^= 0x55;
  spit(files[0], bytes);
  kernel_cache_forget_memory();
  auto rebuilt = cached_cubin(src, headers, 90, "t.cu");
  EXPECT_EQ(*rebuilt, *first);
  EXPECT_EQ(kernel_cache_stats().nvrtc_compiles, s0.nvrtc_compiles + 2);
  EXPECT_EQ(kernel_cache_stats().disk_rejects, s0.disk_rejects + 1);
  EXPECT_EQ(slurp(files[0]).size(), bytes.size());
  kernel_cache_forget_memory();
  cached_cubin(src, headers, 90, "t.cu");
  EXPECT_EQ(kernel_cache_stats().nvrtc_compiles, s0.nvrtc_compiles + 2);  // the rewritten file is good
  unsetenv("KILN_CACHE_DIR");
}

TEST(KernelCache, AnUnwritableCacheFolderOnlyCostsTheDiskCache) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  TempDir dir;
  fs::create_directories(dir.path.parent_path());
  spit(dir.path, "a file where the folder should be");
  ASSERT_EQ(setenv("KILN_CACHE_DIR", (dir.path / "sub").c_str(), 1), 0);
  kernel_cache_forget_memory();
  auto cubin = cached_cubin("extern \"C\" __global__ void k2() {}", {}, 90, "t2.cu");
  EXPECT_FALSE(cubin->empty());
  unsetenv("KILN_CACHE_DIR");
  fs::remove(dir.path);
}

TEST(KernelCache, RequestsCompileSideBySideWithOneCompilePerKey) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  TempDir dir;
  ASSERT_EQ(setenv("KILN_CACHE_DIR", dir.path.c_str(), 1), 0);
  kernel_cache_forget_memory();
  const KernelCacheStats s0 = kernel_cache_stats();
  std::vector<CubinFuture> first, second;
  for (int k = 0; k < 6; ++k) {
    const std::string src = "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] += " + std::to_string(k) +
                            ".0f; }  // " + std::to_string(getpid());
    first.push_back(cubin_async(src, {}, 90, "t.cu"));
    second.push_back(cubin_async(src, {}, 90, "t.cu"));  // while the first may still compile
  }
  for (int k = 0; k < 6; ++k) {
    EXPECT_FALSE(first[k].get()->empty());
    EXPECT_EQ(first[k].get(), second[k].get()) << "request " << k << " compiled twice";
    for (int j = 0; j < k; ++j) EXPECT_NE(*first[k].get(), *first[j].get());
  }
  EXPECT_EQ(kernel_cache_stats().nvrtc_compiles, s0.nvrtc_compiles + 6);
  EXPECT_EQ(kernel_cache_stats().memory_hits, s0.memory_hits + 6);

  // A compile error reaches every waiter and is not kept: asking again compiles (and fails) again.
  const std::string broken = "extern \"C\" __global__ void k(float* p) { p[0] = undeclared; }";
  for (int attempt = 0; attempt < 2; ++attempt) {
    CubinFuture f = cubin_async(broken, {}, 90, "broken.cu");
    try {
      f.get();
      ADD_FAILURE() << "a broken kernel compiled";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("undeclared"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(kernel_cache_stats().nvrtc_compiles, s0.nvrtc_compiles + 8);
  unsetenv("KILN_CACHE_DIR");
}

TEST(KernelCache, AForkedChildCompilesAfresh) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  TempDir dir;
  ASSERT_EQ(setenv("KILN_CACHE_DIR", dir.path.c_str(), 1), 0);
  kernel_cache_forget_memory();
  const std::string src = "extern \"C\" __global__ void forked(float* p) { p[0] = 3.0f; }  // " +
                          std::to_string(getpid());
  CubinFuture in_parent = cubin_async(src, {}, 90, "fork.cu");  // likely still compiling at the fork
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(120);  // a child waiting on the parent's pool threads (gone after fork) would hang: fail instead
    try {
      _exit(cubin_async(src, {}, 90, "fork.cu").get()->empty() ? 2 : 0);
    } catch (...) {
      _exit(3);
    }
  }
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  EXPECT_FALSE(in_parent.get()->empty());
  unsetenv("KILN_CACHE_DIR");
}

}  // namespace
}  // namespace kiln::cuda
