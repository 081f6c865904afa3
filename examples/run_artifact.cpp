// run_artifact: loads a saved kiln program and runs it on the CPU with the
// public C++ API alone (include/kiln/program.h): no Python, no torch.
//
//   run_artifact MODEL.kiln                       runs on a fixed ramp of inputs, prints the outputs' sizes and sums
//   run_artifact MODEL.kiln INPUTS.bin EXPECTED.bin
//       reads the inputs (raw bytes, one after another in input order),
//       runs, and exits 0 only if the outputs equal EXPECTED.bin bit for bit.
#include <kiln/program.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <vector>

namespace {

std::vector<std::byte> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string("cannot open ") + path);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL.kiln [INPUTS.bin EXPECTED.bin]\n", argv[0]);
    return 2;
  }
  try {
    kiln::Program program = kiln::Program::load(argv[1]);
    if (!program.unbound_weights().empty()) {
      std::fprintf(stderr, "%s holds no weights for %zu of them (bind them with Program::bind_weight)\n", argv[1],
                   program.unbound_weights().size());
      return 1;
    }
    std::vector<kiln::TensorInfo> infos = program.inputs();
    std::vector<std::vector<std::byte>> storage;
    if (argc == 4) {
      std::vector<std::byte> all = read_file(argv[2]);
      size_t at = 0;
      for (const kiln::TensorInfo& info : infos) {
        if (all.size() - at < info.nbytes()) throw std::runtime_error("INPUTS.bin is too short");
        storage.emplace_back(all.begin() + at, all.begin() + at + info.nbytes());
        at += info.nbytes();
      }
    } else {
      for (const kiln::TensorInfo& info : infos) {
        if (info.dtype != kiln::ElementType::f32) throw std::runtime_error("the ramp fills f32 inputs only");
        std::vector<float> ramp(info.numel());
        for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<float>(i % 17) / 8.0f - 1.0f;
        storage.emplace_back(info.nbytes());
        std::memcpy(storage.back().data(), ramp.data(), info.nbytes());
      }
    }
    std::vector<kiln::TensorRef> inputs;
    for (size_t i = 0; i < infos.size(); ++i) inputs.push_back({storage[i].data(), infos[i].dtype, infos[i].shape, {}});
    std::vector<kiln::Tensor> outputs = program.run(inputs);

    if (argc == 4) {
      std::vector<std::byte> expected = read_file(argv[3]);
      size_t at = 0;
      for (size_t i = 0; i < outputs.size(); ++i) {
        const auto& b = outputs[i].bytes;
        if (expected.size() - at < b.size() || std::memcmp(expected.data() + at, b.data(), b.size()) != 0) {
          std::fprintf(stderr, "output %zu differs from the expected bytes\n", i);
          return 1;
        }
        at += b.size();
      }
      if (at != expected.size()) {
        std::fprintf(stderr, "EXPECTED.bin has %zu bytes more than the outputs\n", expected.size() - at);
        return 1;
      }
      std::printf("%zu outputs equal the expected bytes\n", outputs.size());
      return 0;
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      double sum = 0;
      if (outputs[i].dtype == kiln::ElementType::f32)
        for (int64_t j = 0; j < static_cast<int64_t>(outputs[i].bytes.size() / 4); ++j) sum += outputs[i].data<float>()[j];
      std::printf("output %zu: %s, %zu bytes, sum %g\n", i, kiln::element_type_name(outputs[i].dtype),
                  outputs[i].bytes.size(), sum);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
