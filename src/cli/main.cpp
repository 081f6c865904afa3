// The kiln command (installed with the Python package, built from C++ on the
// public API alone): inspect, run and bench saved programs with no Python.
// Exit status: 0 done, 1 the work failed (bad file, bad input), 2 bad usage.
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli_args.h"
#include "commands.h"

namespace {

constexpr const char* kUsage =
    "usage: kiln COMMAND [ARGS] (kiln COMMAND --help for each)\n"
    "\n"
    "Commands on saved kiln programs (files written by kiln.save):\n"
    "  inspect FILE   what the program holds: ops, kernels, memory plan, weights, sizes\n"
    "  run FILE       run once on .npy or random inputs, write the outputs to .npy\n"
    "  bench FILE     latency percentiles over repeated calls\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  try {
    if (command == "inspect") return kiln::cli::inspect_command(args);
    if (command == "run") return kiln::cli::run_command(args);
    if (command == "bench") return kiln::cli::bench_command(args);
    std::cerr << "kiln: unknown command '" << command << "'\n" << kUsage;
    return 2;
  } catch (const kiln::cli::UsageError& e) {
    std::cerr << "kiln " << command << ": " << e.what() << " (see kiln " << command << " --help)\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kiln " << command << ": error: " << e.what() << "\n";
    return 1;
  }
}
