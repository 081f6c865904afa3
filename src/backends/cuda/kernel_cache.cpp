// The compiled-kernel cache (kernel_cache.h).
#include "backends/cuda/kernel_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <unordered_map>

#include "support/env.h"
#include "support/error.h"
#include "support/log.h"

namespace kiln::cuda {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'B', 'N', '1'};

// FNV-1a over bytes, from a given basis: two bases give a 128-bit key.
uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

struct Hasher {
  uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
  // Each part is length-prefixed, so ("ab","c") and ("a","bc") differ.
  void add(const std::string& s) {
    uint64_t len = s.size();
    a = fnv1a(&len, sizeof(len), a);
    b = fnv1a(&len, sizeof(len), b);
    a = fnv1a(s.data(), s.size(), a);
    b = fnv1a(s.data(), s.size(), b);
  }
  std::string hex() const {
    char buf[33];
    std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(a),
                  static_cast<unsigned long long>(b));
    return buf;
  }
};

uint64_t checksum(const std::string& s) { return fnv1a(s.data(), s.size(), 0xcbf29ce484222325ull); }

struct MemoryCache {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const std::string>> cubins;
  KernelCacheStats stats;
};

MemoryCache& memory() {
  static MemoryCache* cache = new MemoryCache();  // never destroyed: used until exit
  return *cache;
}

}  // namespace

std::string kernel_cache_key(const std::string& source, const std::vector<NvrtcHeader>& headers, int arch,
                             const std::string& nvrtc_version) {
  Hasher h;
  h.add(kKilnCodegenVersion);
  h.add(str_cat("sm_", arch));
  h.add(nvrtc_version);
  h.add(source);
  for (const NvrtcHeader& hd : headers) {
    h.add(hd.name);
    h.add(hd.text);
  }
  return h.hex();
}

std::string kernel_cache_dir() { return env::kernel_cache_dir(); }

std::optional<std::string> read_cache_file(const std::string& path, const std::string& key) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // magic, key length (u32), key, payload length (u64), payload checksum (u64), payload
  size_t at = 0;
  auto take = [&](void* dst, size_t n) {
    if (data.size() - at < n) return false;
    std::memcpy(dst, data.data() + at, n);
    at += n;
    return true;
  };
  char magic[sizeof(kMagic)];
  uint32_t key_len = 0;
  if (!take(magic, sizeof(magic)) || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) return std::nullopt;
  if (!take(&key_len, sizeof(key_len)) || key_len != key.size() || data.size() - at < key_len) return std::nullopt;
  if (data.compare(at, key_len, key) != 0) return std::nullopt;
  at += key_len;
  uint64_t len = 0, sum = 0;
  if (!take(&len, sizeof(len)) || !take(&sum, sizeof(sum)) || data.size() - at != len || len == 0) return std::nullopt;
  std::string payload = data.substr(at);
  if (checksum(payload) != sum) return std::nullopt;
  return payload;
}

bool write_cache_file(const std::string& path, const std::string& key, const std::string& payload) {
  namespace fs = std::filesystem;
  static std::atomic<uint64_t> counter{0};
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string tmp = str_cat(path, ".tmp.", getpid(), ".", counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    uint32_t key_len = static_cast<uint32_t>(key.size());
    uint64_t len = payload.size(), sum = checksum(payload);
    out.write(kMagic, sizeof(kMagic));
    out.write(reinterpret_cast<const char*>(&key_len), sizeof(key_len));
    out.write(key.data(), static_cast<std::streamsize>(key.size()));
    out.write(reinterpret_cast<const char*>(&len), sizeof(len));
    out.write(reinterpret_cast<const char*>(&sum), sizeof(sum));
    out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    out.flush();
    if (!out) {
      out.close();
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

std::shared_ptr<const std::string> cached_cubin(const std::string& source, const std::vector<NvrtcHeader>& headers,
                                                int arch, const std::string& program_name) {
  const std::string key = kernel_cache_key(source, headers, arch, nvrtc_version());
  MemoryCache& m = memory();
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    auto it = m.cubins.find(key);
    if (it != m.cubins.end()) {
      ++m.stats.memory_hits;
      return it->second;
    }
  }
  const std::string path = kernel_cache_dir() + "/" + key + ".cubin";
  std::optional<std::string> cubin = read_cache_file(path, key);
  bool from_disk = cubin.has_value();
  if (!from_disk) {
    std::error_code ec;
    bool present = std::filesystem::exists(path, ec);
    cubin = nvrtc_compile_cubin(source, headers, arch, program_name);
    bool written = write_cache_file(path, key, *cubin);
    if (!written) log_at(LogLevel::warn, "kernel cache: cannot write ", path, "; compiled kernels are not kept on disk");
    std::lock_guard<std::mutex> lock(m.mutex);
    m.stats.disk_rejects += present ? 1 : 0;
    m.stats.disk_writes += written ? 1 : 0;
  }
  auto shared = std::make_shared<const std::string>(std::move(*cubin));
  std::lock_guard<std::mutex> lock(m.mutex);
  if (from_disk) ++m.stats.disk_hits;
  return m.cubins.emplace(key, shared).first->second;
}

KernelCacheStats kernel_cache_stats() {
  MemoryCache& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  KernelCacheStats s = m.stats;
  s.nvrtc_compiles = nvrtc_compile_count();
  return s;
}

void kernel_cache_forget_memory() {
  MemoryCache& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.cubins.clear();
}

}  // namespace kiln::cuda
