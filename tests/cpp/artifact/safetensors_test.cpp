// Safetensors tests: a weightless artifact re-bound from a safetensors file
// (kiln::Program::bind_safetensors) runs bit for bit like the in-process
// executable, strided weights included; a tensor of the wrong shape is named
// in the error; hostile files (truncated at every byte, bad JSON, offsets
// outside the data, sizes that disagree, deep nesting) are each rejected
// with kiln::Error(corrupt_file).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "ir/graph.h"
#include "kiln/program.h"
#include "ops/op_def.h"
#include "passes/pass.h"
#include "runtime/artifact_safetensors.h"
#include "runtime/artifact_writer.h"
#include "runtime/executable.h"
#include "support/error.h"

namespace kiln {
namespace {

struct StTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// A safetensors image as the `safetensors` package writes one.
std::vector<uint8_t> safetensors_bytes(const std::vector<StTensor>& tensors) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  std::vector<uint8_t> data;
  for (const StTensor& t : tensors) {
    const size_t begin = data.size();
    const auto* p = reinterpret_cast<const uint8_t*>(t.values.data());
    data.insert(data.end(), p, p + t.values.size() * sizeof(float));
    header += ",\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) header += (i ? "," : "") + std::to_string(t.shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(data.size()) + "]}";
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(uint64_t(header.size()) >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

std::string temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("kiln_safetensors_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::string corrupt_error(std::vector<uint8_t> bytes) {
  try {
    SafetensorsFile::from_bytes(std::move(bytes), "test");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::corrupt_file) << e.what();
    return e.what();
  }
  return "<no error>";
}

std::vector<uint8_t> with_header(const std::string& header, size_t data_bytes = 16) {
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(uint64_t(header.size()) >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + data_bytes);
  return out;
}

TEST(Safetensors, ParsesWhatThePackageWrites) {
  const std::vector<float> a = random_floats(6, 1), b = random_floats(4, 2);
  auto file = SafetensorsFile::from_bytes(safetensors_bytes({{"a.weight", "F32", {2, 3}, a}, {"b", "F32", {4}, b}}),
                                          "test");
  ASSERT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->metadata().at("format"), "pt");
  const SafetensorsEntry* e = file->find("a.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dtype, DType::f32);
  EXPECT_EQ(e->shape, (Dims{2, 3}));
  ASSERT_EQ(e->data.size(), 24u);
  EXPECT_EQ(std::memcmp(e->data.data(), a.data(), 24), 0);
  EXPECT_EQ(std::memcmp(file->find("b")->data.data(), b.data(), 16), 0);
}

TEST(Safetensors, WeightlessProgramBindsFromFileBitExact) {
  auto g = std::make_unique<Graph>();
  Value* x = g->add_input("x", TensorType(DType::f32, {2, 4}));
  Value* w1 = g->add_weight("w1", TensorType(DType::f32, {4, 8}), "fc1.weight");
  Value* w2 = g->add_weight("w2", TensorType(DType::f32, {8, 3}, {1, 8}), "fc2.weight");  // stored transposed
  Value* h = g->add_node(get_op("matmul"), {x, w1})->outputs[0];
  h = g->add_node(get_op("relu"), {h})->outputs[0];
  g->set_outputs({g->add_node(get_op("matmul"), {h, w2})->outputs[0]});
  run_pipeline(*g);
  Executable exe(std::move(g));
  const std::vector<float> vw1 = random_floats(32, 3), vw2 = random_floats(24, 4), vx = random_floats(8, 5);
  exe.bind_weight("fc1.weight", TensorView(const_cast<float*>(vw1.data()), TensorType(DType::f32, {4, 8})));
  exe.bind_weight("fc2.weight", TensorView(const_cast<float*>(vw2.data()), TensorType(DType::f32, {8, 3}, {1, 8})));
  std::vector<float> expected(6);
  TensorView ins[] = {TensorView(const_cast<float*>(vx.data()), TensorType(DType::f32, {2, 4}))};
  TensorView outs[] = {TensorView(expected.data(), TensorType(DType::f32, {2, 3}))};
  exe.run(ins, outs);
  ArtifactSaveOptions options;
  options.weights = false;
  const std::string model = temp_path("bare.kiln");
  save_artifact(exe, model, options);

  // The file holds fc2.weight as a contiguous [8, 3] tensor: element (i, j) is vw2[j * 8 + i].
  std::vector<float> w2_contiguous(24);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 3; ++j) w2_contiguous[i * 3 + j] = vw2[j * 8 + i];
  const std::string weights = temp_path("w.safetensors");
  write_file(weights, safetensors_bytes({{"fc1.weight", "F32", {4, 8}, vw1}, {"fc2.weight", "F32", {8, 3}, w2_contiguous},
                                         {"unused", "F32", {1}, {1.0f}}}));
  Program program = Program::load(model);
  EXPECT_EQ(program.unbound_weights().size(), 2u);
  EXPECT_EQ(program.bind_safetensors(weights), 2u);
  EXPECT_TRUE(program.unbound_weights().empty());
  std::vector<float> input = vx;
  auto got = program.run({TensorRef{input.data(), ElementType::f32, {2, 4}, {}}});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(std::memcmp(got[0].data<float>(), expected.data(), 24), 0);

  const std::string wrong = temp_path("wrong.safetensors");
  write_file(wrong, safetensors_bytes({{"fc1.weight", "F32", {8, 4}, vw1}}));
  Program again = Program::load(model);
  try {
    again.bind_safetensors(wrong);
    FAIL() << "a weight of the wrong shape was bound";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fc1.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[8,4]"), std::string::npos) << e.what();
  }
}

TEST(SafetensorsHostile, TruncatedAtEveryByte) {
  const auto good = safetensors_bytes({{"a", "F32", {2, 3}, random_floats(6, 1)}, {"b", "F32", {2}, {1, 2}}});
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_NE(corrupt_error(std::vector<uint8_t>(good.begin(), good.begin() + n)), "<no error>") << n;
}

TEST(SafetensorsHostile, BadHeaders) {
  const std::pair<std::string, std::string> cases[] = {
      {"{", "expected a key"},
      {"{\"a\":", "unexpected end"},
      {"[]", "not a JSON object"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", "after the header"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,32]}}", "outside the data"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", "need 12"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", "outside the data"},
      {"{\"a\":{\"dtype\":\"C64\",\"shape\":[1],\"data_offsets\":[0,8]}}", "not supported"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", "unexpected character"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}}", "out of range"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1048576,1048576,1048576],\"data_offsets\":[0,4]}}", "too large"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{}}", "twice"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", "lacks"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", "unknown field"},
      {"{\"a\":\"str\\q\"}", "bad escape"},
      {"{\"__metadata__\":{\"k\":1}}", "not a string"},
      {std::string("{\"a\":") + std::string(100, '[') + std::string(100, ']') + "}", "nested too deeply"},
  };
  for (const auto& [header, want] : cases) {
    const std::string message = corrupt_error(with_header(header));
    EXPECT_NE(message.find(want), std::string::npos) << header << " -> " << message;
  }
  std::vector<uint8_t> huge(16, 0);
  huge[7] = 0x7f;  // a header length far past the file
  EXPECT_NE(corrupt_error(huge).find("runs past the end"), std::string::npos);
}

}  // namespace
}  // namespace kiln
