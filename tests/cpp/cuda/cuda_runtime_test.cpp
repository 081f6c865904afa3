// The CUDA executable's call path (runtime/executable.h): the first call runs
// eagerly, later ones replay a CUDA graph; a call with an input or output at
// another address replays a graph recorded for those pointers, or past the
// kept graphs an updated one or the graph on static slots (each path forced by
// NewAddresses); an in-place weight update is seen by the replay; cuda_graphs=false never captures; and
// calls alternating between two streams stay correct (the fence). Every
// result is checked against the CPU executable. Skips without a device.
#include <random>

#include "cuda_test_util.h"
#include "passes/pass.h"
#include "runtime/executable.h"

namespace kiln::test {
namespace {

// y = relu(x @ w + x) * 0.5 (a matmul, then one fused group)
std::unique_ptr<Graph> mlp_graph() {
  auto g = std::make_unique<Graph>();
  Value* x = g->add_input("x", TensorType(DType::f32, {16, 32}));
  Value* w = g->add_weight("w", TensorType(DType::f32, {32, 32}), "w");
  Value* h = g->add_node(get_op("matmul"), {x, w})->outputs[0];
  h = g->add_node(get_op("add"), {h, x})->outputs[0];
  h = g->add_node(get_op("relu"), {h})->outputs[0];
  g->set_outputs({g->add_node(get_op("mul"), {h, g->add_scalar(0.5, DType::f32)})->outputs[0]});
  run_pipeline(*g);
  return g;
}

struct Fixture {
  std::unique_ptr<Graph> graph = mlp_graph();
  Executable cpu{*graph, Device{DeviceKind::cpu, 0}};
  std::mt19937 rng{7};
  HostTensor w = random_tensor(DType::f32, {32, 32}, rng);
  DeviceTensor dw{w};

  Fixture() { cpu.bind_weight("w", w.view()); }
  HostTensor reference(HostTensor& x) {
    HostTensor out = alloc_tensor(cpu.output_types()[0]);
    TensorView in[] = {x.view()}, outs[] = {out.view()};
    cpu.run(in, outs);
    return out;
  }
  // Runs `gpu` on x (uploaded) into a fresh output and checks it.
  void check(Executable& gpu, HostTensor& x, cudaStream_t stream, const std::string& what) {
    DeviceTensor dx(x), out(poisoned(gpu.output_types()[0]));
    TensorView in[] = {dx.view()}, outs[] = {out.view()};
    gpu.run(in, outs, Stream{stream});
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    expect_match(out.download(), reference(x), what);
  }
  // check(), with the input and output kept alive so that every such call has addresses of its own.
  std::vector<std::unique_ptr<DeviceTensor>> alive;
  void check_at_new_addresses(Executable& gpu, cudaStream_t stream, const std::string& what) {
    HostTensor x = random_tensor(DType::f32, {16, 32}, rng);
    alive.push_back(std::make_unique<DeviceTensor>(x));
    alive.push_back(std::make_unique<DeviceTensor>(poisoned(gpu.output_types()[0])));
    TensorView in[] = {alive[alive.size() - 2]->view()}, outs[] = {alive.back()->view()};
    gpu.run(in, outs, Stream{stream});
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    expect_match(alive.back()->download(), reference(x), what);
  }
};

TEST(CudaRuntime, GraphsReplayFollowNewAddressesAndWeightUpdates) {
  KILN_REQUIRE_CUDA();
  Fixture f;
  ExecutableOptions options;
  options.new_addresses = NewAddresses::update;
  Executable gpu(*f.graph, Device{DeviceKind::cuda, 0}, options);
  gpu.bind_weight("w", f.dw.view());
  cudaStream_t s = nullptr;
  KILN_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  HostTensor x = random_tensor(DType::f32, {16, 32}, f.rng);
  DeviceTensor dx(x), out(poisoned(gpu.output_types()[0]));
  TensorView in[] = {dx.view()}, outs[] = {out.view()};
  for (int call = 0; call < 3; ++call) {
    gpu.run(in, outs, Stream{s});
    KILN_CUDA_OK(cudaStreamSynchronize(s));
    expect_match(out.download(), f.reference(x), str_cat("call ", call));
  }
  CallStats st = gpu.call_stats();
  EXPECT_EQ(st.uncaptured_reason, "");
  EXPECT_EQ(st.graph_captures, 1);
  EXPECT_EQ(st.graph_replays, 2);
  EXPECT_NE(gpu.describe().find("CUDA graphs on"), std::string::npos);

  // New weight values in place: the replay reads them.
  f.w = random_tensor(DType::f32, {32, 32}, f.rng);
  f.cpu.bind_weight("w", f.w.view());
  KILN_CUDA_OK(cudaMemcpy(f.dw.data, f.w.data(), f.dw.bytes, cudaMemcpyHostToDevice));
  KILN_CUDA_OK(cudaDeviceSynchronize());  // the DMA has landed before the non-blocking stream reads it
  gpu.run(in, outs, Stream{s});
  KILN_CUDA_OK(cudaStreamSynchronize(s));
  expect_match(out.download(), f.reference(x), "after the weight update");
  EXPECT_EQ(gpu.call_stats().graph_captures, 1);

  // Inputs and outputs at new addresses, more sets than graphs kept: captures, then updates.
  for (int k = 0; k < 6; ++k) f.check_at_new_addresses(gpu, s, str_cat("new addresses ", k));
  st = gpu.call_stats();
  EXPECT_EQ(st.graph_replays, st.calls - 1);
  EXPECT_GE(st.graph_updates + st.graph_captures, 7);
  EXPECT_EQ(st.slot_calls, 0);
  cudaStreamDestroy(s);
}

TEST(CudaRuntime, StaticSlotsCarryNewAddressesAndMovedWeights) {
  KILN_REQUIRE_CUDA();
  Fixture f;
  ExecutableOptions options;
  options.new_addresses = NewAddresses::slots;
  Executable gpu(*f.graph, Device{DeviceKind::cuda, 0}, options);
  gpu.bind_weight("w", f.dw.view());
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  // One eager call, four kept graphs, then three calls through the slots.
  for (int k = 0; k < 8; ++k) f.check_at_new_addresses(gpu, s, str_cat("new addresses ", k));
  CallStats st = gpu.call_stats();
  EXPECT_EQ(st.uncaptured_reason, "");
  EXPECT_EQ(st.graph_replays, 7);
  EXPECT_EQ(st.slot_calls, 3);
  EXPECT_EQ(st.graph_captures, 5);  // the four kept, and the one on the slots
  EXPECT_EQ(st.graph_updates, 0);

  // The weight moves to another buffer: the graph on the slots is re-recorded for it.
  f.w = random_tensor(DType::f32, {32, 32}, f.rng);
  f.cpu.bind_weight("w", f.w.view());
  DeviceTensor moved(f.w);
  gpu.bind_weight("w", moved.view());
  f.check_at_new_addresses(gpu, s, "after the weight moved");
  f.check_at_new_addresses(gpu, s, "after the weight moved, again");
  st = gpu.call_stats();
  EXPECT_EQ(st.slot_calls, 5);
  EXPECT_EQ(st.graph_updates, 1);
  EXPECT_EQ(st.graph_captures, 5);
  cudaStreamDestroy(s);
}

TEST(CudaRuntime, GraphsOffNeverCapture) {
  KILN_REQUIRE_CUDA();
  Fixture f;
  ExecutableOptions options;
  options.cuda_graphs = false;
  Executable gpu(*f.graph, Device{DeviceKind::cuda, 0}, options);
  gpu.bind_weight("w", f.dw.view());
  for (int call = 0; call < 3; ++call) {
    HostTensor x = random_tensor(DType::f32, {16, 32}, f.rng);
    f.check(gpu, x, nullptr, str_cat("call ", call));
  }
  EXPECT_EQ(gpu.call_stats().graph_replays, 0);
  EXPECT_NE(gpu.describe().find("CUDA graphs off"), std::string::npos);
}

TEST(CudaRuntime, CallsAlternatingBetweenStreamsStayOrdered) {
  KILN_REQUIRE_CUDA();
  Fixture f;
  Executable gpu(*f.graph, Device{DeviceKind::cuda, 0});
  gpu.bind_weight("w", f.dw.view());
  cudaStream_t streams[2];
  for (cudaStream_t& s : streams) KILN_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  HostTensor xs[2] = {random_tensor(DType::f32, {16, 32}, f.rng), random_tensor(DType::f32, {16, 32}, f.rng)};
  HostTensor want[2] = {f.reference(xs[0]), f.reference(xs[1])};
  DeviceTensor dx0(xs[0]), dx1(xs[1]);
  const DeviceTensor* dxs[2] = {&dx0, &dx1};
  std::vector<std::unique_ptr<DeviceTensor>> outs;
  for (int call = 0; call < 100; ++call) {
    const int k = call % 2;
    outs.push_back(std::make_unique<DeviceTensor>(poisoned(gpu.output_types()[0])));
    TensorView in[] = {dxs[k]->view()}, out[] = {outs.back()->view()};
    gpu.run(in, out, Stream{streams[k]});  // no host wait between calls
  }
  for (cudaStream_t s : streams) KILN_CUDA_OK(cudaStreamSynchronize(s));
  for (size_t call = 0; call < outs.size(); ++call)
    expect_match(outs[call]->download(), want[call % 2], str_cat("call ", call));
  for (cudaStream_t s : streams) cudaStreamDestroy(s);
}

}  // namespace
}  // namespace kiln::test
