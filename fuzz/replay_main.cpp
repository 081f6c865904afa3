// Replays fuzz inputs without libFuzzer: feeds every file under each folder
// (or each file) named on the command line to the target's
// LLVMFuzzerTestOneInput, so the seed corpus and every crash found are
// re-run by ctest with the normal compiler. Exits nonzero when a path
// cannot be read or holds no input at all.
//
// With --mutate-seconds=N it then fuzzes for N seconds without libFuzzer:
// random mutations of the replayed inputs (bit flips, random and boundary
// bytes and words, inserted, erased and duplicated ranges, truncations,
// splices of two inputs), each fed to the target. Not coverage-guided, but it
// needs no clang, so CI runs it under the sanitizers on every build. A crash,
// a sanitizer report or an escaped exception writes the input to
// ./fuzz-crash-<target>-<seed>-<n> before the process dies. --seed=S picks the
// sequence (default: the clock); the same seed replays the same inputs.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Present only in sanitizer builds.
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> read_file(const fs::path& file, bool* ok) {
  std::ifstream in(file, std::ios::binary);
  *ok = static_cast<bool>(in);
  if (!*ok) std::fprintf(stderr, "cannot read %s\n", file.c_str());
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The input being tried, written out if the process dies on it.
std::vector<uint8_t> g_current;
std::string g_crash_path;

void save_current() {
  if (g_crash_path.empty()) return;
  if (FILE* f = std::fopen(g_crash_path.c_str(), "wb")) {
    std::fwrite(g_current.data(), 1, g_current.size(), f);
    std::fclose(f);
    std::fprintf(stderr, "fuzz: the failing input is in %s\n", g_crash_path.c_str());
  }
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  std::vector<uint8_t> mutate(const std::vector<std::vector<uint8_t>>& corpus) {
    std::vector<uint8_t> b = corpus[below(corpus.size())];
    const size_t steps = 1 + below(8);
    for (size_t s = 0; s < steps; ++s) step(b, corpus);
    return b;
  }

 private:
  size_t below(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  void step(std::vector<uint8_t>& b, const std::vector<std::vector<uint8_t>>& corpus) {
    static constexpr uint64_t kBoundary[] = {0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff, 0xffffffff,
                                             0x7fffffffffffffff, 0xffffffffffffffff, 0x100000000};
    switch (below(8)) {
      case 0:  // flip a bit
        if (!b.empty()) b[below(b.size())] ^= static_cast<uint8_t>(1u << below(8));
        break;
      case 1:  // a random byte
        if (!b.empty()) b[below(b.size())] = static_cast<uint8_t>(below(256));
        break;
      case 2: {  // a boundary value as a 1-, 2-, 4- or 8-byte little-endian word
        const size_t width = size_t{1} << below(4);
        if (b.size() < width) break;
        const uint64_t v = kBoundary[below(std::size(kBoundary))];
        std::memcpy(b.data() + below(b.size() - width + 1), &v, width);
        break;
      }
      case 3: {  // insert random bytes
        const size_t at = below(b.size() + 1), n = 1 + below(16);
        std::vector<uint8_t> bytes(n);
        for (uint8_t& x : bytes) x = static_cast<uint8_t>(below(256));
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), bytes.begin(), bytes.end());
        break;
      }
      case 4: {  // erase a range
        if (b.empty()) break;
        const size_t at = below(b.size()), n = 1 + below(std::min<size_t>(b.size() - at, 64));
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + n));
        break;
      }
      case 5:  // truncate
        b.resize(below(b.size() + 1));
        break;
      case 6: {  // duplicate a range in place
        if (b.empty()) break;
        const size_t at = below(b.size()), n = 1 + below(std::min<size_t>(b.size() - at, 64));
        std::vector<uint8_t> chunk(b.begin() + static_cast<std::ptrdiff_t>(at),
                                   b.begin() + static_cast<std::ptrdiff_t>(at + n));
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(below(b.size() + 1)), chunk.begin(), chunk.end());
        break;
      }
      default: {  // splice: this input's head, another's tail
        const std::vector<uint8_t>& other = corpus[below(corpus.size())];
        const size_t cut = below(b.size() + 1), from = below(other.size() + 1);
        b.resize(cut);
        b.insert(b.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
        break;
      }
    }
  }

  std::mt19937_64 rng_;
};

bool flag_value(const char* arg, const char* name, uint64_t* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = std::strtoull(arg + n + 1, nullptr, 10);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t mutate_seconds = 0;
  uint64_t seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::vector<std::vector<uint8_t>> corpus;
  bool paths = false;
  for (int i = 1; i < argc; ++i) {
    if (flag_value(argv[i], "--mutate-seconds", &mutate_seconds) || flag_value(argv[i], "--seed", &seed)) continue;
    paths = true;
    std::error_code ec;
    std::vector<fs::path> files;
    if (fs::is_directory(argv[i], ec)) {
      for (const auto& e : fs::recursive_directory_iterator(argv[i]))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
    } else if (fs::is_regular_file(argv[i], ec)) {
      files.push_back(argv[i]);
    } else {
      std::fprintf(stderr, "no such file or folder: %s\n", argv[i]);
      return 1;
    }
    for (const auto& f : files) {
      bool ok = false;
      std::vector<uint8_t> bytes = read_file(f, &ok);
      if (!ok) continue;
      LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
      corpus.push_back(std::move(bytes));
    }
  }
  if (!paths) {
    std::fprintf(stderr, "usage: %s [--mutate-seconds=N] [--seed=S] CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "no inputs replayed\n");
    return 1;
  }
  std::printf("replayed %zu inputs\n", corpus.size());
  if (mutate_seconds == 0) return 0;

  if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(save_current);
  std::set_terminate([] {
    save_current();
    std::abort();
  });
  const std::string target = fs::path(argv[0]).filename().string();
  Mutator mutator(seed);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(mutate_seconds);
  uint64_t n = 0;
  for (; std::chrono::steady_clock::now() < end; ++n) {
    g_current = mutator.mutate(corpus);
    g_crash_path = "fuzz-crash-" + target + "-" + std::to_string(seed) + "-" + std::to_string(n);
    LLVMFuzzerTestOneInput(g_current.data(), g_current.size());
  }
  g_crash_path.clear();
  std::printf("mutated %llu inputs in %llu s (seed %llu), no finding\n", static_cast<unsigned long long>(n),
              static_cast<unsigned long long>(mutate_seconds), static_cast<unsigned long long>(seed));
  return 0;
}
