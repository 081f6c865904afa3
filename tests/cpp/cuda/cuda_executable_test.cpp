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

// q, k, v = x @ Wq^T + bq, x @ Wk^T, x @ Wv^T + bv (attention's projections); outputs q * k and v.
std::unique_ptr<Graph> projections_graph(DType d) {
  auto g = std::make_unique<Graph>();
  Value* x = g->add_input("x", TensorType(d, {64, 96}));
  Attrs perm;
  perm.set("dims", std::vector<int64_t>{1, 0});
  std::vector<Value*> outs;
  for (const char* name : {"q", "k", "v"}) {
    Value* w = g->add_weight(std::string("w") + name, TensorType(d, {96, 96}), std::string(name) + ".weight");
    Value* wt = g->add_node(get_op("permute"), {w}, perm)->outputs[0];
    Value* y = g->add_node(get_op("matmul"), {x, wt})->outputs[0];
    if (std::string(name) != "k") {
      Value* b = g->add_weight(std::string("b") + name, TensorType(d, {96}), std::string(name) + ".bias");
      y = g->add_node(get_op("add"), {y, b})->outputs[0];
    }
    outs.push_back(y);
  }
  // v is an output of its own: an add of it would become the residual of v's product, after q * k.
  g->set_outputs({g->add_node(get_op("mul"), {outs[0], outs[1]})->outputs[0], outs[2]});
  return g;
}

// Note [Concurrent matmuls]: the three products run on three streams (eager, captured and replayed calls)
// and give exactly what one stream gives, and what the CPU gives within rounding.
TEST(CudaExecutable, ProductsSideBySideMatchOneStream) {
  KILN_REQUIRE_CUDA();
  for (DType d : {DType::f32, DType::f16}) {
    auto graph = projections_graph(d);
    run_pipeline(*graph);
    Executable cpu_exe(*graph, Device{DeviceKind::cpu, 0});
    Executable side_exe(*graph, Device{DeviceKind::cuda, 0});
    ExecutableOptions one_stream;
    one_stream.concurrent_matmuls = false;
    Executable one_exe(*graph, Device{DeviceKind::cuda, 0}, one_stream);
    EXPECT_NE(side_exe.describe().find("1 spans of products side by side"), std::string::npos) << side_exe.describe();
    EXPECT_NE(side_exe.describe().find("(span 0, branch 2)"), std::string::npos) << side_exe.describe();
    EXPECT_EQ(one_exe.describe().find("side by side"), std::string::npos) << one_exe.describe();

    std::mt19937 rng(5);
    HostTensor x = random_tensor(d, {64, 96}, rng);
    std::vector<HostTensor> weights;
    std::vector<std::unique_ptr<DeviceTensor>> device_weights;
    for (const std::string& key : cpu_exe.weight_keys()) {
      const Value* w = nullptr;
      for (const Value* v : graph->weights())
        if (v->weight_key == key) w = v;
      weights.push_back(random_tensor(d, w->type.dims, rng));
      cpu_exe.bind_weight(key, weights.back().view());
      device_weights.push_back(std::make_unique<DeviceTensor>(weights.back()));
      side_exe.bind_weight(key, device_weights.back()->view());
      one_exe.bind_weight(key, device_weights.back()->view());
    }
    std::vector<HostTensor> want;
    std::vector<TensorView> want_views;
    for (const TensorType& t : cpu_exe.output_types()) want.push_back(alloc_tensor(t));
    for (HostTensor& t : want) want_views.push_back(t.view());
    TensorView cpu_in[] = {x.view()};
    cpu_exe.run(cpu_in, want_views);

    cudaStream_t stream = nullptr;
    KILN_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    DeviceTensor dx(x);
    TensorView gpu_in[] = {dx.view()};
    auto outputs_of = [&](Executable& exe) -> std::vector<HostTensor> {
      std::vector<std::unique_ptr<DeviceTensor>> got;
      std::vector<TensorView> views;
      for (const TensorType& t : exe.output_types()) {
        got.push_back(std::make_unique<DeviceTensor>(poisoned(t)));
        views.push_back(got.back()->view());
      }
      for (int call = 0; call < 3; ++call) exe.run(gpu_in, views, Stream{stream});  // eager, captured, replayed
      EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      std::vector<HostTensor> host;
      for (auto& t : got) host.push_back(t->download());
      return host;
    };
    std::vector<HostTensor> side = outputs_of(side_exe), one = outputs_of(one_exe);
    cudaStreamDestroy(stream);
    EXPECT_EQ(side_exe.call_stats().graph_replays, 2);
    for (size_t k = 0; k < want.size(); ++k) {
      expect_match(side[k], want[k], str_cat(dtype_name(d), " output ", k), 16.0);
      EXPECT_EQ(side[k].words, one[k].words) << dtype_name(d) << " output " << k << " differs from one stream's";
    }
  }
}

}  // namespace
}  // namespace kiln::test
