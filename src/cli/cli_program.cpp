// Loading and input making for the kiln command (cli_program.h).
#include "cli_program.h"

#include <cstring>
#include <random>
#include <stdexcept>

#include "npy.h"

namespace kiln::cli {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Program load_program(const Args& args) {
  LoadOptions options;
  options.device = args.get("device", "cpu");
  if (options.device != "cpu" && options.device != "cuda" && options.device.rfind("cuda:", 0) != 0)
    throw UsageError("--device is cpu, cuda or cuda:N, got '" + options.device + "'");
  Program program = Program::load(args.positional.at(0), options);
  for (const std::string& file : args.all("weights")) program.bind_safetensors(file);
  const std::vector<std::string> unbound = program.unbound_weights();
  if (!unbound.empty()) {
    std::string names;
    for (size_t i = 0; i < unbound.size() && i < 5; ++i) names += (i ? ", " : "") + unbound[i];
    throw std::runtime_error(args.positional[0] + " holds no data for " + std::to_string(unbound.size()) +
                             " weight(s) (" + names + (unbound.size() > 5 ? ", ..." : "") +
                             "); pass them with --weights FILE.safetensors");
  }
  return program;
}

namespace {

// Fills `t` with values of its element type: normal floats, small integers, random booleans.
void fill_random(Tensor& t, std::mt19937_64& rng) {
  const size_t n = t.bytes.size() / element_size(t.dtype);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> small(0, 9);
  for (size_t i = 0; i < n; ++i) {
    std::byte* p = t.bytes.data() + i * element_size(t.dtype);
    switch (t.dtype) {
      case ElementType::f32: { float v = normal(rng); std::memcpy(p, &v, 4); break; }
      case ElementType::f64: { double v = normal(rng); std::memcpy(p, &v, 8); break; }
      case ElementType::f16: case ElementType::bf16: {
        // Values in [-2, 2) with few mantissa bits, exact in both 16-bit formats.
        const float v = static_cast<float>(small(rng) - 5) * 0.25f;
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        uint16_t h;
        if (t.dtype == ElementType::bf16) {
          h = static_cast<uint16_t>(bits >> 16);
        } else if (v == 0.0f) {
          h = 0;
        } else {
          const uint32_t sign = bits >> 31, exp = ((bits >> 23) & 0xff) - 127 + 15, mant = (bits >> 13) & 0x3ff;
          h = static_cast<uint16_t>(sign << 15 | exp << 10 | mant);
        }
        std::memcpy(p, &h, 2);
        break;
      }
      case ElementType::i64: { int64_t v = small(rng); std::memcpy(p, &v, 8); break; }
      case ElementType::i32: { int32_t v = small(rng); std::memcpy(p, &v, 4); break; }
      case ElementType::i16: { int16_t v = static_cast<int16_t>(small(rng)); std::memcpy(p, &v, 2); break; }
      case ElementType::i8: case ElementType::u8: { uint8_t v = static_cast<uint8_t>(small(rng)); std::memcpy(p, &v, 1); break; }
      case ElementType::boolean: { uint8_t v = small(rng) % 2; std::memcpy(p, &v, 1); break; }
    }
  }
}

}  // namespace

std::vector<Tensor> make_inputs(const Program& program, const std::vector<std::string>& npy_files, uint64_t seed) {
  const std::vector<TensorInfo> want = program.inputs();
  std::vector<Tensor> out;
  if (!npy_files.empty()) {
    if (npy_files.size() != want.size())
      throw UsageError("the program takes " + std::to_string(want.size()) + " input(s), got " +
                       std::to_string(npy_files.size()) + " --input file(s)");
    for (size_t i = 0; i < want.size(); ++i) {
      Tensor t = read_npy(npy_files[i]);
      if (t.dtype != want[i].dtype || t.shape != want[i].shape)
        throw std::runtime_error("input " + std::to_string(i) + " ('" + npy_files[i] + "') is " +
                                 element_type_name(t.dtype) + shape_text(t.shape) + ", the program takes " +
                                 element_type_name(want[i].dtype) + shape_text(want[i].shape));
      out.push_back(std::move(t));
    }
    return out;
  }
  std::mt19937_64 rng(seed);
  for (const TensorInfo& info : want) {
    Tensor t;
    t.dtype = info.dtype;
    t.shape = info.shape;
    t.bytes.resize(info.nbytes());
    fill_random(t, rng);
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<TensorRef> refs(std::vector<Tensor>& tensors) {
  std::vector<TensorRef> out;
  for (Tensor& t : tensors) out.push_back(t.ref());
  return out;
}

}  // namespace kiln::cli
