// `kiln run FILE`: runs a saved program once on .npy or random inputs and
// writes each output to OUT/output_<i>.npy. On CUDA the inputs and outputs
// are staged through device buffers (Program::run's host overload).
#include <filesystem>
#include <iostream>

#include "cli_args.h"
#include "cli_program.h"
#include "commands.h"
#include "npy.h"

namespace kiln::cli {

namespace {

constexpr const char* kUsage =
    "usage: kiln run FILE [--input X.npy ...] [--out DIR] [--weights W.safetensors]\n"
    "                     [--seed N] [--device cpu|cuda]\n"
    "\n"
    "Runs a saved kiln program once and writes each output to DIR/output_<i>.npy.\n"
    "\n"
    "  --input X.npy    one per program input, in order (dtype and shape must match);\n"
    "                   without any, inputs are random (normal floats, integers 0..9)\n"
    "  --out DIR        where the outputs go (default kiln-out; created if missing)\n"
    "  --weights FILE   a safetensors file holding the weights of a program saved\n"
    "                   without them (may be given more than once)\n"
    "  --seed N         the random inputs' seed (default 0)\n"
    "  --device DEVICE  cpu (default), cuda or cuda:N (inputs and outputs are\n"
    "                   copied to and from the GPU)\n";

}  // namespace

int run_command(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {"input", "out", "weights", "seed", "device"}, {});
  if (args.has("help")) {
    std::cout << kUsage;
    return 0;
  }
  if (args.positional.size() != 1) throw UsageError("run takes one FILE");
  const uint64_t seed = static_cast<uint64_t>(args.get_count("seed", 0, 1LL << 62));
  const std::string out_dir = args.get("out", "kiln-out");
  Program program = load_program(args);
  std::vector<Tensor> inputs = make_inputs(program, args.all("input"), seed);
  const std::vector<TensorRef> in_refs = refs(inputs);
  const std::vector<Tensor> outputs = program.run(in_refs);
  std::filesystem::create_directories(out_dir);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string path = (std::filesystem::path(out_dir) / ("output_" + std::to_string(i) + ".npy")).string();
    write_npy(path, outputs[i]);
    std::cout << path << ": " << element_type_name(outputs[i].dtype) << shape_text(outputs[i].shape) << "\n";
  }
  return 0;
}

}  // namespace kiln::cli
