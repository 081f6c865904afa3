// The compiled-kernel cache (kernel_cache.h).
#include "backends/cuda/kernel_cache.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <thread>
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

struct CachedCubin {
  CubinFuture future;
  uint64_t id;  // which request made it, so a failed compile removes only its own entry
};

struct MemoryCache {
  std::mutex mutex;
  // Finished compiles and those under way, by key: a second request waits for the first.
  std::unordered_map<std::string, CachedCubin> cubins;
  KernelCacheStats stats;
};

class CompilePool;

// The process's cache and pool, made on first use and never destroyed (used
// until exit), and fork(): a fork waits until no NVRTC compile runs (`gate`:
// compiles hold it shared, the fork exclusively), so the child's copy of
// NVRTC is idle. The child has none of the parent's threads and may have
// copied the cache's and pool's mutexes locked: it starts a fresh cache and
// pool (the parent's are abandoned, never touched), so a compile the parent
// had queued is asked for again instead of waited for forever.
struct State {
  std::atomic<MemoryCache*> cache{nullptr};
  std::atomic<CompilePool*> pool{nullptr};
  // Replaced, not unlocked, in the child: a lock taken before fork() cannot be
  // released there (the thread has another id).
  std::atomic<std::shared_mutex*> gate{new std::shared_mutex()};
};

State& state() {
  static State* s = [] {
    pthread_atfork([] { state().gate.load()->lock(); }, [] { state().gate.load()->unlock(); },
                   [] {
                     state().gate.store(new std::shared_mutex());
                     state().cache.store(nullptr);
                     state().pool.store(nullptr);
                   });
    return new State();
  }();
  return *s;
}

// *slot, made here if there is none yet (the first of racing threads wins, so T() must start nothing).
template <typename T>
T& made_once(std::atomic<T*>& slot, bool* made) {
  T* have = slot.load(std::memory_order_acquire);
  *made = false;
  if (have != nullptr) return *have;
  T* fresh = new T();
  if (slot.compare_exchange_strong(have, fresh, std::memory_order_acq_rel)) {
    *made = true;
    return *fresh;
  }
  delete fresh;
  return *have;
}

MemoryCache& memory() {
  bool made = false;
  return made_once(state().cache, &made);
}

// Worker threads that run cache lookups and NVRTC compiles in request order.
class CompilePool {
 public:
  void start() {
    const unsigned n = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
    for (unsigned i = 0; i < n; ++i) std::thread([this] { work(); }).detach();
  }
  void submit(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    wake_.notify_one();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
};

CompilePool& compile_pool() {
  bool made = false;
  CompilePool& pool = made_once(state().pool, &made);
  if (made) pool.start();
  return pool;
}

// The CUBIN for `key` from disk, else NVRTC (then written to disk).
std::shared_ptr<const std::string> load_or_compile(const std::string& key, const std::string& source,
                                                   const std::vector<NvrtcHeader>& headers, int arch,
                                                   const std::string& program_name) {
  MemoryCache& m = memory();
  const std::string path = kernel_cache_dir() + "/" + key + ".cubin";
  std::optional<std::string> cubin = read_cache_file(path, key);
  if (cubin) {
    std::lock_guard<std::mutex> lock(m.mutex);
    ++m.stats.disk_hits;
  } else {
    std::error_code ec;
    bool present = std::filesystem::exists(path, ec);
    cubin = nvrtc_compile_cubin(source, headers, arch, program_name);
    bool written = write_cache_file(path, key, *cubin);
    if (!written) log_at(LogLevel::warn, "kernel cache: cannot write ", path, "; compiled kernels are not kept on disk");
    std::lock_guard<std::mutex> lock(m.mutex);
    m.stats.disk_rejects += present ? 1 : 0;
    m.stats.disk_writes += written ? 1 : 0;
  }
  return std::make_shared<const std::string>(std::move(*cubin));
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

CubinFuture cubin_async(const std::string& source, const std::vector<NvrtcHeader>& headers, int arch,
                        const std::string& program_name) {
  static std::atomic<uint64_t> next_id{0};
  const std::string key = kernel_cache_key(source, headers, arch, nvrtc_version());
  MemoryCache& m = memory();
  auto promise = std::make_shared<std::promise<std::shared_ptr<const std::string>>>();
  const uint64_t id = next_id++;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    auto [it, inserted] = m.cubins.emplace(key, CachedCubin{promise->get_future().share(), id});
    if (!inserted) {
      ++m.stats.memory_hits;
      return it->second.future;
    }
    CubinFuture future = it->second.future;
    compile_pool().submit([promise, id, key, source, headers, arch, program_name] {
      try {
        std::shared_lock<std::shared_mutex> no_fork_meanwhile(*state().gate.load());
        promise->set_value(load_or_compile(key, source, headers, arch, program_name));
      } catch (...) {
        {
          // A failed compile is not kept: the next request tries again and reports its own error.
          MemoryCache& mc = memory();
          std::lock_guard<std::mutex> guard(mc.mutex);
          auto at = mc.cubins.find(key);
          if (at != mc.cubins.end() && at->second.id == id) mc.cubins.erase(at);
        }
        promise->set_exception(std::current_exception());
      }
    });
    return future;
  }
}

std::shared_ptr<const std::string> cached_cubin(const std::string& source, const std::vector<NvrtcHeader>& headers,
                                                int arch, const std::string& program_name) {
  return cubin_async(source, headers, arch, program_name).get();
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
