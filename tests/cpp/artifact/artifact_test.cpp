// Artifact tests: save -> load -> run equals the in-process executable bit
// for bit (weights mapped from the file, and weightless files re-bound by
// the caller), the public kiln::Program API, and hostile files (truncated at
// every byte, random byte flips, wrong magic and version, forged tables with
// valid checksums) each rejected with kiln::Error(corrupt_file).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "ir/graph.h"
#include "ir/printer.h"
#include "kiln/program.h"
#include "mlp_graph.h"
#include "ops/op_def.h"
#include "passes/pass.h"
#include "runtime/artifact_format.h"
#include "runtime/artifact_reader.h"
#include "runtime/artifact_writer.h"
#include "runtime/backend.h"
#include "runtime/cuda_architecture.h"
#include "runtime/executable.h"
#include "support/error.h"

namespace kiln {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

struct Fixture {
  std::unique_ptr<Executable> exe = std::make_unique<Executable>(mlp_graph());
  std::vector<float> w1 = random_floats(32, 1), b1 = random_floats(8, 2), w2 = random_floats(24, 3);
  std::vector<float> x = random_floats(8, 4);

  void bind(Executable& e) {
    e.bind_weight("fc1.weight", TensorView(w1.data(), TensorType(DType::f32, {4, 8})));
    e.bind_weight("fc1.bias", TensorView(b1.data(), TensorType(DType::f32, {8})));
    e.bind_weight("fc2.weight", TensorView(w2.data(), TensorType(DType::f32, {8, 3}, {1, 8})));
  }
  std::vector<std::vector<float>> run(Executable& e) {
    std::vector<float> y(6, -1), h(16, -1);
    TensorView ins[] = {TensorView(x.data(), TensorType(DType::f32, {2, 4}))};
    TensorView outs[] = {TensorView(y.data(), TensorType(DType::f32, {2, 3})),
                         TensorView(h.data(), TensorType(DType::f32, {2, 8}))};
    e.run(ins, outs);
    return {y, h};
  }
};

std::string temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("kiln_artifact_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::string corrupt_error(std::vector<uint8_t> bytes) {
  try {
    auto a = Artifact::from_bytes(std::move(bytes));
    LoadedProgram p(a);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::corrupt_file) << e.what();
    return e.what();
  }
  return "<no error>";
}

std::vector<uint8_t> saved_bytes(bool weights = true) {
  Fixture f;
  f.bind(*f.exe);
  std::string path = temp_path(weights ? "hostile.kiln" : "hostile_nw.kiln");
  ArtifactSaveOptions options;
  options.weights = weights;
  save_artifact(*f.exe, path, options);
  return read_bytes(path);
}

TEST(Artifact, SaveLoadRunIsBitExact) {
  Fixture f;
  f.bind(*f.exe);
  auto expected = f.run(*f.exe);
  std::string path = temp_path("mlp.kiln");
  ArtifactSaveOptions options;
  options.metadata["note"] = "test";
  save_artifact(*f.exe, path, options);

  LoadedProgram loaded(Artifact::open(path));
  EXPECT_TRUE(loaded.unbound_weights().empty());
  EXPECT_EQ(loaded.artifact().metadata().at("note"), "test");
  EXPECT_EQ(loaded.artifact().graph_text(), print_graph(f.exe->graph()));
  auto got = f.run(loaded.executable());
  EXPECT_TRUE(bit_equal(got[0], expected[0]));
  EXPECT_TRUE(bit_equal(got[1], expected[1]));
  // The weights are read in place from the mapping, aligned, never copied.
  for (const auto& [key, ptr] : loaded.executable().bound_weights()) {
    bool found = false;
    for (const ArtifactWeight& w : loaded.artifact().weights())
      if (w.key == key) {
        EXPECT_EQ(ptr, w.data) << key;
        found = true;
      }
    EXPECT_TRUE(found) << key;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(ptr) % artifact::kWeightAlignment, 0u) << key;
  }
}

TEST(Artifact, MathModesAreSavedAndUsedByTheLoader) {
  for (const MathOptions math : {MathOptions{}, MathOptions{true, false}, MathOptions{false, true}, MathOptions{true, true}})
    EXPECT_EQ(parse_math_options(to_string(math)), math) << to_string(math);
  EXPECT_EQ(to_string(MathOptions{true, true}), "tf32_matmul,tf32_conv");
  try {
    parse_math_options("tf32_matmul,fast");
    ADD_FAILURE() << "an unknown mode was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown math mode 'fast'"), std::string::npos) << e.what();
  }

  // The CPU computes f32 exactly whatever the modes; a saved program carries them to its loader.
  ExecutableOptions options;
  options.math.tf32_matmul = true;
  Executable exe(*mlp_graph(), Device{}, options);
  EXPECT_NE(exe.describe().find("math tf32_matmul"), std::string::npos) << exe.describe();
  Fixture f;
  f.bind(exe);
  f.bind(*f.exe);
  EXPECT_TRUE(bit_equal(f.run(exe)[0], f.run(*f.exe)[0]));
  const std::string path = temp_path("math.kiln");
  save_artifact(exe, path);
  LoadedProgram loaded(Artifact::open(path));
  EXPECT_EQ(loaded.artifact().metadata().at(kMathKey), "tf32_matmul");
  EXPECT_EQ(loaded.executable().math(), options.math);
  save_artifact(*f.exe, path);  // default modes: nothing recorded
  EXPECT_EQ(Artifact::open(path)->metadata().count(kMathKey), 0u);
}

TEST(Artifact, WeightlessSaveRebindsWeights) {
  Fixture f;
  f.bind(*f.exe);
  auto expected = f.run(*f.exe);
  std::string path = temp_path("mlp_nw.kiln");
  ArtifactSaveOptions options;
  options.weights = false;
  save_artifact(*f.exe, path, options);
  EXPECT_LT(std::filesystem::file_size(path), 4096u);  // no weight data section

  LoadedProgram loaded(Artifact::open(path));
  EXPECT_EQ(loaded.unbound_weights().size(), 3u);
  EXPECT_THROW(f.run(loaded.executable()), Error);
  f.bind(loaded.executable());
  auto got = f.run(loaded.executable());
  EXPECT_TRUE(bit_equal(got[0], expected[0]));
  EXPECT_TRUE(bit_equal(got[1], expected[1]));
}

TEST(Artifact, UnboundWeightsCannotBeSaved) {
  Fixture f;
  try {
    save_artifact(*f.exe, temp_path("unbound.kiln"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not bound"), std::string::npos) << e.what();
  }
}

TEST(Artifact, SavedOutputsAreTheProgramsReorderedRepeatedOrDropped) {
  Fixture f;
  f.bind(*f.exe);
  auto expected = f.run(*f.exe);  // the executable returns y [2,3], h [2,8]
  std::string path = temp_path("mlp_outputs.kiln");
  ArtifactSaveOptions options;
  options.outputs = {1, 0, 1};  // the program returns h, y, h
  save_artifact(*f.exe, path, options);

  Program program = Program::load(path);
  const std::vector<TensorInfo> outs = program.outputs();
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[0].shape, (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(outs[1].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(outs[2].shape, (std::vector<int64_t>{2, 8}));
  std::vector<Tensor> got = program.run({TensorRef{f.x.data(), ElementType::f32, {2, 4}, {}}});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(std::memcmp(got[0].data<float>(), expected[1].data(), 16 * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(got[1].data<float>(), expected[0].data(), 6 * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(got[2].data<float>(), expected[1].data(), 16 * sizeof(float)), 0);

  options.outputs = {0};  // h dropped
  save_artifact(*f.exe, path, options);
  EXPECT_EQ(Program::load(path).outputs().size(), 1u);

  options.outputs = {2};
  try {
    save_artifact(*f.exe, path, options);
    FAIL() << "an output index past the executable's outputs was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("output index 2 is out of range"), std::string::npos) << e.what();
  }
}

TEST(Artifact, PublicProgramApi) {
  Fixture f;
  f.bind(*f.exe);
  auto expected = f.run(*f.exe);
  std::string path = temp_path("mlp_api.kiln");
  save_artifact(*f.exe, path);

  Program program = Program::load(path);
  ASSERT_EQ(program.inputs().size(), 1u);
  EXPECT_EQ(program.inputs()[0].shape, (std::vector<int64_t>{2, 4}));
  ASSERT_EQ(program.outputs().size(), 2u);
  EXPECT_EQ(program.weights().size(), 3u);
  EXPECT_EQ(program.device(), "cpu");
  auto outs = program.run({TensorRef{f.x.data(), ElementType::f32, {2, 4}}});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(std::memcmp(outs[0].data<float>(), expected[0].data(), 6 * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(outs[1].data<float>(), expected[1].data(), 16 * sizeof(float)), 0);

  // Memory from the program's device (host memory here), as kiln bench uses it.
  DeviceMemory in = program.allocate(f.x.size() * sizeof(float));
  DeviceMemory y = program.allocate(6 * sizeof(float)), h = program.allocate(16 * sizeof(float));
  ASSERT_EQ(y.size(), 6 * sizeof(float));
  program.upload(in.data(), f.x.data(), in.size());
  const TensorRef in_ref{in.data(), ElementType::f32, {2, 4}};
  const TensorRef out_refs[] = {{y.data(), ElementType::f32, {2, 3}}, {h.data(), ElementType::f32, {2, 8}}};
  program.run(std::span(&in_ref, 1), out_refs);
  std::vector<float> got(6);
  program.download(got.data(), y.data(), y.size());
  EXPECT_TRUE(bit_equal(got, expected[0]));

  // Without weights: bound by their user names.
  ArtifactSaveOptions options;
  options.weights = false;
  save_artifact(*f.exe, path, options);
  Program bare = Program::load(path);
  EXPECT_EQ(bare.unbound_weights().size(), 3u);
  bare.bind_weight("fc1.weight", TensorRef{f.w1.data(), ElementType::f32, {4, 8}});
  bare.bind_weight("fc1.bias", TensorRef{f.b1.data(), ElementType::f32, {8}});
  bare.bind_weight("fc2.weight", TensorRef{f.w2.data(), ElementType::f32, {8, 3}, {1, 8}});
  EXPECT_TRUE(bare.unbound_weights().empty());
  auto outs2 = bare.run({TensorRef{f.x.data(), ElementType::f32, {2, 4}}});
  EXPECT_EQ(std::memcmp(outs2[0].data<float>(), expected[0].data(), 6 * sizeof(float)), 0);
}

TEST(Artifact, CudaArchitectureCheckNamesBothAndLetsNewerGpusRun) {
  auto error_of = [](const std::string& built, const std::string& here) -> std::pair<ErrorKind, std::string> {
    try {
      check_cuda_architecture(built, here, "cuda:0");
    } catch (const Error& e) {
      return {e.kind(), e.what()};
    }
    return {ErrorKind::runtime, ""};
  };
  auto [kind, message] = error_of("sm_90", "sm_80");
  EXPECT_EQ(kind, ErrorKind::unsupported);
  EXPECT_NE(message.find("built for sm_90 GPUs; this GPU (cuda:0) is sm_80"), std::string::npos) << message;
  EXPECT_EQ(error_of("sm_75", "sm_90").second, "");   // older builds run on newer GPUs
  EXPECT_EQ(error_of("sm_90", "sm_90").second, "");
  EXPECT_EQ(error_of("sm_90", "sm_100").second, "");  // three-digit majors compare as numbers
  EXPECT_NE(error_of("sm_100", "sm_90").second, "");
  for (const char* bad : {"", "sm_", "sm_9", "sm_9a", "compute_90", "sm_1000"}) {
    auto [k, m] = error_of(bad, "sm_90");
    EXPECT_EQ(k, ErrorKind::corrupt_file) << bad;
    EXPECT_NE(m.find("unknown GPU architecture"), std::string::npos) << m;
  }
}

TEST(Artifact, InspectionAndDeviceErrors) {
  Fixture f;
  f.bind(*f.exe);
  std::string path = temp_path("mlp_info.kiln");
  save_artifact(*f.exe, path);
  Program program = Program::load(path);
  const FileInfo info = program.file_info();
  EXPECT_EQ(info.file_size, std::filesystem::file_size(path));
  EXPECT_EQ(info.format_version, artifact::kFormatVersion);
  EXPECT_TRUE(info.has_weight_data);
  ASSERT_EQ(info.sections.size(), 5u);
  EXPECT_EQ(info.sections.back().name, "weight data");
  EXPECT_EQ(info.sections.back().offset % artifact::kWeightDataAlignment, 0u);
  EXPECT_GE(program.op_counts().at("matmul"), 1);  // the pipeline may fuse the bias add into one
  EXPECT_TRUE(program.weight_stored("fc1.weight"));
  EXPECT_NE(program.graph_text().find("graph {"), std::string::npos);

  LoadOptions bad;
  bad.device = "gpu";
  EXPECT_THROW(Program::load(path, bad), Error);
  if (!cuda_available()) {
    LoadOptions cuda;
    cuda.device = "cuda";
    try {
      Program::load(path, cuda);
      FAIL() << "loaded on cuda without CUDA";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::unsupported);
      EXPECT_NE(std::string(e.what()).find("CUDA is not available"), std::string::npos) << e.what();
    }
  }
}

TEST(ArtifactHostile, TruncatedAtEveryByte) {
  for (bool weights : {true, false}) {
    std::vector<uint8_t> bytes = saved_bytes(weights);
    for (size_t n = 0; n < bytes.size(); ++n) {
      std::string msg = corrupt_error(std::vector<uint8_t>(bytes.begin(), bytes.begin() + n));
      ASSERT_NE(msg, "<no error>") << "truncated to " << n;
    }
  }
}

TEST(ArtifactHostile, RandomByteFlips) {
  for (bool weights : {true, false}) {
    std::vector<uint8_t> bytes = saved_bytes(weights);
    std::mt19937 rng(1234);
    for (int i = 0; i < 3000; ++i) {
      std::vector<uint8_t> b = bytes;
      size_t at = rng() % b.size();
      b[at] ^= static_cast<uint8_t>(1 + rng() % 255);
      ASSERT_NE(corrupt_error(std::move(b)), "<no error>") << "flip at " << at;
    }
  }
}

TEST(ArtifactHostile, WrongMagicAndVersion) {
  std::vector<uint8_t> bytes = saved_bytes();
  std::vector<uint8_t> b = bytes;
  b[0] = 'X';
  EXPECT_NE(corrupt_error(b).find("bad magic"), std::string::npos);
  b = bytes;
  b[8] = 2;  // version 2
  EXPECT_NE(corrupt_error(b).find("format version 2 is not supported"), std::string::npos);
  EXPECT_NE(corrupt_error({}).find("shorter than"), std::string::npos);
  b = bytes;
  b.push_back(0);
  EXPECT_NE(corrupt_error(b).find("trailing bytes"), std::string::npos);
}

// Rewrites section `kind` of a valid file and re-seals every checksum, so the
// reader's checks behind the checksums are exercised.
std::vector<uint8_t> forge(const std::vector<uint8_t>& file, artifact::SectionKind kind,
                           const std::vector<uint8_t>& content) {
  using namespace artifact;
  auto u32_at = [&](size_t at) { uint32_t v; std::memcpy(&v, file.data() + at, 4); return v; };
  auto u64_at = [&](size_t at) { uint64_t v; std::memcpy(&v, file.data() + at, 8); return v; };
  const uint32_t count = u32_at(12);
  // Re-lay the sections in order with the new content.
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> sections;
  for (uint32_t i = 0; i < count; ++i) {
    size_t e = kHeaderSize + i * kTableEntrySize;
    uint32_t k = u32_at(e);
    uint64_t off = u64_at(e + 8), size = u64_at(e + 16);
    if (k == static_cast<uint32_t>(kind))
      sections.emplace_back(k, content);
    else
      sections.emplace_back(k, std::vector<uint8_t>(file.begin() + off, file.begin() + off + size));
  }
  ByteWriter table, body;
  uint64_t at = kHeaderSize + kTableEntrySize * count;
  std::vector<uint8_t> out(at, 0);
  for (auto& [k, bytes] : sections) {
    uint64_t align = k == static_cast<uint32_t>(SectionKind::weight_data) ? kWeightDataAlignment : kSectionAlignment;
    uint64_t off = align_up(out.size(), align);
    out.resize(off, 0);
    out.insert(out.end(), bytes.begin(), bytes.end());
    table.u32(k);
    table.u32(0);
    table.u64(off);
    table.u64(bytes.size());
    table.u64(checksum(bytes));
  }
  ByteWriter header;
  header.raw(std::span(reinterpret_cast<const uint8_t*>(kMagic), 8));
  header.u32(kFormatVersion);
  header.u32(count);
  header.u64(out.size());
  header.u64(checksum(table.bytes()));
  for (int i = 0; i < 3; ++i) header.u64(0);
  header.u64(checksum(std::span(header.bytes()).first(56)));
  std::copy(header.bytes().begin(), header.bytes().end(), out.begin());
  std::copy(table.bytes().begin(), table.bytes().end(), out.begin() + kHeaderSize);
  return out;
}

TEST(ArtifactHostile, ForgedSectionsWithValidChecksums) {
  using artifact::SectionKind;
  std::vector<uint8_t> bytes = saved_bytes();
  // The forger itself reproduces a valid file.
  EXPECT_EQ(corrupt_error(forge(bytes, SectionKind::metadata, {0, 0, 0, 0})), "<no error>");

  std::string text = "graph { this is not IR }";
  EXPECT_NE(corrupt_error(forge(bytes, SectionKind::graph, {text.begin(), text.end()})).find("graph section"),
            std::string::npos);
  // Counts far beyond the bytes that would hold them: rejected before any allocation.
  EXPECT_NE(corrupt_error(forge(bytes, SectionKind::metadata, {0xff, 0xff, 0xff, 0xff})).find("cannot fit"),
            std::string::npos);
  EXPECT_NE(corrupt_error(forge(bytes, SectionKind::weight_table, {0xff, 0xff, 0xff, 0xff})).find("cannot fit"),
            std::string::npos);
  EXPECT_NE(corrupt_error(forge(bytes, SectionKind::weight_table, {0, 0, 0, 0})).find("not in the weight table"),
            std::string::npos);
  // A string length past the end.
  EXPECT_NE(corrupt_error(forge(bytes, SectionKind::metadata, {1, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0}))
                .find("truncated"),
            std::string::npos);

  // Found by the fuzzer: dims each in range but with a product past the limit,
  // and zero strides so that the bytes they span look small. Rejected before
  // anything computes with them (contiguous strides would overflow).
  artifact::ByteWriter w;
  w.u32(1);
  w.str("w1");
  w.str("fc1.weight");
  w.u8(0);  // f32
  w.u8(0);  // not stored
  w.u32(2);
  w.i64(int64_t{1} << 40);
  w.i64(int64_t{1} << 40);
  w.i64(0);
  w.i64(0);
  w.u64(0);
  w.u64(4);
  EXPECT_NE(corrupt_error(forge(bytes, SectionKind::weight_table, w.bytes())).find("too large"), std::string::npos);
  // The same with a dim of size 0 (no elements, but the other dims' product still overflows strides).
  artifact::ByteWriter z;
  z.u32(1);
  z.str("w1");
  z.str("fc1.weight");
  z.u8(0);
  z.u8(0);
  z.u32(3);
  z.i64(int64_t{1} << 40);
  z.i64(int64_t{1} << 40);
  z.i64(0);
  for (int i = 0; i < 3; ++i) z.i64(0);
  z.u64(0);
  z.u64(0);
  EXPECT_NE(corrupt_error(forge(bytes, SectionKind::weight_table, z.bytes())).find("too large"), std::string::npos);
}

}  // namespace
}  // namespace kiln
