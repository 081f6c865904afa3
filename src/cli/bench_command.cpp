// `kiln bench FILE`: times repeated calls of a saved program on random inputs
// and prints the latency percentiles; runs longer than a couple of seconds
// show their progress on stderr. The inputs are copied once into memory on
// the program's device and the timed calls use Program::run's device overload;
// each timed call ends with a one-byte download of an output, which first
// waits for the device to finish the call (on the CPU, calls are synchronous
// and the download is a one-byte copy).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <iostream>

#include "cli_args.h"
#include "cli_program.h"
#include "commands.h"

namespace kiln::cli {

namespace {

constexpr const char* kUsage =
    "usage: kiln bench FILE [--iters N] [--warmup N] [--weights W.safetensors]\n"
    "                       [--seed N] [--device cpu|cuda]\n"
    "\n"
    "Calls a saved kiln program repeatedly on random inputs and prints the\n"
    "latency per call (min, mean, p50, p90, p99, max, in milliseconds). On a GPU\n"
    "the inputs stay in device memory and each call is timed until it finishes.\n"
    "\n"
    "  --iters N        timed calls (default 100)\n"
    "  --warmup N       untimed calls first (default 10)\n"
    "  --weights FILE   a safetensors file for a program saved without weights\n"
    "  --seed N         the random inputs' seed (default 0)\n"
    "  --device DEVICE  cpu (default), cuda or cuda:N\n";

using Clock = std::chrono::steady_clock;

double percentile(const std::vector<double>& sorted, double p) {
  const size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

}  // namespace

int bench_command(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {"iters", "warmup", "weights", "seed", "device"}, {});
  if (args.has("help")) {
    std::cout << kUsage;
    return 0;
  }
  if (args.positional.size() != 1) throw UsageError("bench takes one FILE");
  const long long iters = args.get_count("iters", 100, 100000000);
  const long long warmup = args.get_count("warmup", 10, 100000000);
  if (iters == 0) throw UsageError("--iters must be at least 1");
  Program program = load_program(args);
  const std::vector<Tensor> inputs =
      make_inputs(program, {}, static_cast<uint64_t>(args.get_count("seed", 0, 1LL << 62)));
  std::vector<DeviceMemory> memory;  // the inputs' and outputs' buffers on the program's device
  std::vector<TensorRef> in_refs, out_refs;
  for (const Tensor& t : inputs) {
    memory.push_back(program.allocate(t.bytes.size()));
    program.upload(memory.back().data(), t.bytes.data(), t.bytes.size());
    in_refs.push_back(TensorRef{memory.back().data(), t.dtype, t.shape, {}});
  }
  const std::vector<TensorInfo> outputs = program.outputs();
  for (const TensorInfo& o : outputs) {
    memory.push_back(program.allocate(o.nbytes()));
    out_refs.push_back(TensorRef{memory.back().data(), o.dtype, o.shape, {}});
  }
  // The end-of-call probe: one byte of the first output (none if it is empty;
  // the download still waits for the device).
  std::byte probe{};
  const size_t probe_bytes = outputs.empty() ? 0 : std::min<size_t>(1, outputs[0].nbytes());
  const void* probe_src = outputs.empty() ? nullptr : out_refs[0].data;
  const long long total = warmup + iters;
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(iters));
  const Clock::time_point start = Clock::now();
  Clock::time_point last_report = start;
  bool reported = false;
  for (long long i = 0; i < total; ++i) {
    const Clock::time_point t0 = Clock::now();
    program.run(in_refs, out_refs);
    program.download(&probe, probe_src, probe_bytes);
    const Clock::time_point t1 = Clock::now();
    if (i >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    // Progress: only for runs past 2 s, refreshed twice a second, on one line.
    if (t1 - start > std::chrono::seconds(2) && t1 - last_report > std::chrono::milliseconds(500)) {
      const double elapsed = std::chrono::duration<double>(t1 - start).count();
      const double eta = elapsed / static_cast<double>(i + 1) * static_cast<double>(total - i - 1);
      std::fprintf(stderr, "\r%s %lld/%lld calls, %.1f s elapsed, about %.0f s left   ",
                   i < warmup ? "warmup" : "bench ", i + 1, total, elapsed, eta);
      std::fflush(stderr);
      last_report = t1;
      reported = true;
    }
  }
  if (reported) std::fprintf(stderr, "\n");
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double v : ms) sum += v;
  std::printf("%s: %lld calls after %lld warmup\n", args.positional[0].c_str(), iters, warmup);
  std::printf("latency ms: min %.4f  mean %.4f  p50 %.4f  p90 %.4f  p99 %.4f  max %.4f\n", sorted.front(),
              sum / static_cast<double>(ms.size()), percentile(sorted, 50), percentile(sorted, 90),
              percentile(sorted, 99), sorted.back());
  return 0;
}

}  // namespace kiln::cli
