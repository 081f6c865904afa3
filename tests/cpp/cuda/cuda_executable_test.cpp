// An Executable built for CUDA runs a small transformer-like graph (linear
// with a transposed weight, fused elementwise groups, softmax, layer_norm,
// reductions, literals) end to end on a caller's stream and matches the CPU
// Executable; weights are bound by device pointer. Skips without a device.
#include <random>

#include "cuda_test_util.h"
#include "passes/pass.h"
#include "runtime/executable.h"

namespace kiln::test {
namespace {

// y = layer_norm(gelu(x @ W^T + b) * 0.5 + x2) ; s = softmax(y) ; m = sum(s * y, dim 1)
std::unique_ptr<Graph> block_graph(DType d) {
  auto g = std::make_unique<Graph>();
  Value* x = g->add_input("x", TensorType(d, {2, 9, 16}));
  Value* x2 = g->add_input("x2", TensorType(d, {9, 24}));
  Value* w = g->add_weight("w", TensorType(d, {24, 16}), "fc.weight");
  Value* b = g->add_weight("b", TensorType(d, {24}), "fc.bias");
  Attrs perm;
  perm.set("dims", std::vector<int64_t>{1, 0});
  Value* wt = g->add_node(get_op("permute"), {w}, perm)->outputs[0];
  Value* mm = g->add_node(get_op("matmul"), {x, wt})->outputs[0];
  Value* h = g->add_node(get_op("add"), {mm, b})->outputs[0];
  h = g->add_node(get_op("gelu"), {h})->outputs[0];
  h = g->add_node(get_op("mul"), {h, g->add_scalar(0.5, d)})->outputs[0];
  h = g->add_node(get_op("add"), {h, x2})->outputs[0];
  Value* y = g->add_node(get_op("layer_norm"), {h})->outputs[0];
  Attrs last;
  last.set("dim", int64_t{-1});
  Value* s = g->add_node(get_op("softmax"), {y}, last)->outputs[0];
  Value* sy = g->add_node(get_op("mul"), {s, y})->outputs[0];
  Attrs red;
  red.set("dims", std::vector<int64_t>{1});
  Value* m = g->add_node(get_op("sum"), {sy}, red)->outputs[0];
  g->set_outputs({s, m, y});
  return g;
}

TEST(CudaExecutable, MatchesCpuEndToEnd) {
  KILN_REQUIRE_CUDA();
  for (DType d : {DType::f32, DType::f16, DType::bf16}) {
    auto graph = block_graph(d);
    run_pipeline(*graph);
    Executable cpu_exe(*graph, Device{DeviceKind::cpu, 0});
    Executable gpu_exe(*graph, Device{DeviceKind::cuda, 0});
    EXPECT_NE(gpu_exe.describe().find("[cuda "), std::string::npos) << gpu_exe.describe();

    std::mt19937 rng(21);
    HostTensor x = random_tensor(d, {2, 9, 16}, rng), x2 = random_tensor(d, {9, 24}, rng);
    HostTensor w = random_tensor(d, {24, 16}, rng), b = random_tensor(d, {24}, rng);
    cpu_exe.bind_weight("fc.weight", w.view());
    cpu_exe.bind_weight("fc.bias", b.view());
    DeviceTensor dx(x), dx2(x2), dw(w), db(b);
    gpu_exe.bind_weight("fc.weight", dw.view());
    gpu_exe.bind_weight("fc.bias", db.view());

    std::vector<HostTensor> want;
    std::vector<TensorView> want_views;
    std::vector<std::unique_ptr<DeviceTensor>> got;
    std::vector<TensorView> got_views;
    for (const TensorType& t : cpu_exe.output_types()) {
      want.push_back(alloc_tensor(t));
      got.push_back(std::make_unique<DeviceTensor>(poisoned(t)));
      got_views.push_back(got.back()->view());
    }
    for (HostTensor& t : want) want_views.push_back(t.view());
    TensorView cpu_in[] = {x.view(), x2.view()};
    cpu_exe.run(cpu_in, want_views);

    cudaStream_t stream = nullptr;
    KILN_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    TensorView gpu_in[] = {dx.view(), dx2.view()};
    for (int call = 0; call < 2; ++call) gpu_exe.run(gpu_in, got_views, Stream{stream});
    KILN_CUDA_OK(cudaStreamSynchronize(stream));
    cudaStreamDestroy(stream);
    for (size_t k = 0; k < want.size(); ++k)
      expect_match(got[k]->download(), want[k], str_cat(dtype_name(d), " output ", k), 16.0);
  }
}

}  // namespace
}  // namespace kiln::test
