// make_test_artifact DIR: builds a small MLP program in process,
// runs it on seeded inputs and writes DIR/model.kiln, DIR/inputs.bin and
// DIR/expected.bin, so the ctest of examples/run_artifact can check that the
// standalone example reproduces the in-process results bit for bit.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "ir/graph.h"
#include "ops/op_def.h"
#include "passes/pass.h"
#include "runtime/artifact_writer.h"
#include "runtime/executable.h"

using namespace kiln;

namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

void write(const std::string& path, const std::vector<float>& a, const std::vector<float>& b = {}) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(a.data()), a.size() * sizeof(float));
  out.write(reinterpret_cast<const char*>(b.data()), b.size() * sizeof(float));
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  try {
    std::filesystem::create_directories(dir);
    auto g = std::make_unique<Graph>();
    Value* x = g->add_input("x", TensorType(DType::f32, {2, 5}));
    Value* w1 = g->add_weight("w1", TensorType(DType::f32, {5, 16}), "fc1.weight");
    Value* b1 = g->add_weight("b1", TensorType(DType::f32, {16}), "fc1.bias");
    Value* w2 = g->add_weight("w2", TensorType(DType::f32, {16, 3}), "fc2.weight");
    Value* h = g->add_node(get_op("matmul"), {x, w1})->outputs[0];
    h = g->add_node(get_op("add"), {h, b1})->outputs[0];
    h = g->add_node(get_op("relu"), {h})->outputs[0];
    Value* y = g->add_node(get_op("matmul"), {h, w2})->outputs[0];
    g->set_outputs({y});
    run_pipeline(*g);
    Executable exe(std::move(g));
    std::vector<float> vw1 = random_floats(80, 1), vb1 = random_floats(16, 2), vw2 = random_floats(48, 3);
    exe.bind_weight("fc1.weight", TensorView(vw1.data(), TensorType(DType::f32, {5, 16})));
    exe.bind_weight("fc1.bias", TensorView(vb1.data(), TensorType(DType::f32, {16})));
    exe.bind_weight("fc2.weight", TensorView(vw2.data(), TensorType(DType::f32, {16, 3})));
    std::vector<float> vx = random_floats(10, 4), vy(6);
    TensorView ins[] = {TensorView(vx.data(), TensorType(DType::f32, {2, 5}))};
    TensorView outs[] = {TensorView(vy.data(), TensorType(DType::f32, {2, 3}))};
    exe.run(ins, outs);
    save_artifact(exe, dir + "/model.kiln");
    write(dir + "/inputs.bin", vx);
    write(dir + "/expected.bin", vy);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
