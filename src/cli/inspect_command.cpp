// `kiln inspect FILE`: what a saved program holds, for people: the file
// (size, format version, sections), its metadata, inputs and outputs, the
// weights with their sizes, the ops, and the kernels and memory plan.
#include <cstdio>
#include <iostream>

#include "cli_args.h"
#include "cli_program.h"
#include "commands.h"

namespace kiln::cli {

namespace {

constexpr const char* kUsage =
    "usage: kiln inspect FILE [--graph] [--device cpu|cuda]\n"
    "\n"
    "Prints what a saved kiln program holds: file size and sections, metadata,\n"
    "inputs and outputs, weights (name, dtype, shape, bytes, stored or not),\n"
    "op counts, kernels and the memory plan.\n"
    "\n"
    "  --graph          also print the program's graph as IR text\n"
    "  --device DEVICE  the device to plan for (default cpu)\n";

std::string bytes_text(uint64_t n) {
  char buf[64];
  if (n >= (uint64_t{1} << 20)) std::snprintf(buf, sizeof buf, "%llu bytes (%.1f MiB)", (unsigned long long)n, n / 1048576.0);
  else if (n >= 1024) std::snprintf(buf, sizeof buf, "%llu bytes (%.1f KiB)", (unsigned long long)n, n / 1024.0);
  else std::snprintf(buf, sizeof buf, "%llu bytes", (unsigned long long)n);
  return buf;
}

}  // namespace

int inspect_command(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {"device"}, {"graph"});
  if (args.has("help")) {
    std::cout << kUsage;
    return 0;
  }
  if (args.positional.size() != 1) throw UsageError("inspect takes one FILE");
  LoadOptions options;
  options.device = args.get("device", "cpu");
  const Program program = Program::load(args.positional[0], options);
  const FileInfo file = program.file_info();
  std::cout << "file: " << args.positional[0] << "\n";
  std::cout << "  size: " << bytes_text(file.file_size) << "\n";
  std::cout << "  format version: " << file.format_version << "\n";
  std::cout << "  sections:\n";
  for (const FileInfo::Section& s : file.sections)
    std::cout << "    " << s.name << ": offset " << s.offset << ", " << bytes_text(s.size) << "\n";
  std::cout << "metadata:\n";
  for (const auto& [k, v] : program.metadata()) std::cout << "  " << k << ": " << v << "\n";
  std::cout << "inputs:\n";
  for (const TensorInfo& t : program.inputs())
    std::cout << "  " << t.name << ": " << element_type_name(t.dtype) << shape_text(t.shape) << "\n";
  std::cout << "outputs:\n";
  for (const TensorInfo& t : program.outputs())
    std::cout << "  " << t.name << ": " << element_type_name(t.dtype) << shape_text(t.shape) << "\n";
  const std::vector<TensorInfo> weights = program.weights();
  uint64_t total = 0;
  std::cout << "weights: " << weights.size() << "\n";
  for (const TensorInfo& w : weights) {
    total += w.nbytes();
    std::cout << "  " << w.name << ": " << element_type_name(w.dtype) << shape_text(w.shape) << ", "
              << bytes_text(w.nbytes()) << (program.weight_stored(w.name) ? "" : ", not stored (bind at load)") << "\n";
  }
  std::cout << "  total: " << bytes_text(total) << "\n";
  std::cout << "ops:\n";
  for (const auto& [op, count] : program.op_counts()) std::cout << "  " << op << ": " << count << "\n";
  std::cout << "kernels and memory plan:\n" << program.describe();
  if (args.has("graph")) std::cout << "graph:\n" << program.graph_text();
  return 0;
}

}  // namespace kiln::cli
