// CUDA artifacts: a program compiled for cuda, its weights bound in device
// memory, saves WITH its weights (copied to the host in chunks); the file
// loads on cuda (weights uploaded) and on cpu (weights mapped) and gives the
// in-process outputs bit for bit, through both of kiln::Program's run paths
// (host-staged and device memory). A weight larger than the 64 MiB staging
// buffer is saved byte for byte. Skips without a device.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "cuda_test_util.h"
#include "kiln/program.h"
#include "../artifact/mlp_graph.h"
#include "passes/pass.h"
#include "runtime/artifact_reader.h"
#include "runtime/artifact_writer.h"
#include "runtime/executable.h"

namespace kiln::test {
namespace {

const Device kCuda{DeviceKind::cuda, 0};

std::string temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("kiln_cuda_artifact_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

bool same_bytes(const void* a, const void* b, size_t n) { return std::memcmp(a, b, n) == 0; }

TEST(CudaArtifact, SavedWithWeightsLoadsOnCudaAndCpu) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(5);
  HostTensor x = random_tensor(DType::f32, {2, 4}, rng);
  HostTensor w1 = random_tensor(DType::f32, {4, 8}, rng), b1 = random_tensor(DType::f32, {8}, rng);
  // w2 transposed (strides {1, 8}): a strided weight cuBLASLt reads through its transpose flag.
  HostTensor w2 = alloc_tensor(TensorType(DType::f32, {8, 3}, {1, 8}));
  for_each_index(w2.type.dims, [&](const Dims& i) { w2.set(i, random_value(DType::f32, Fill::continuous, rng)); });
  auto graph = mlp_graph(w2.type);

  // In process: the CPU reference and the CUDA executable on device weights.
  Executable cpu(*graph, Device{DeviceKind::cpu, 0});
  cpu.bind_weight("fc1.weight", w1.view());
  cpu.bind_weight("fc1.bias", b1.view());
  cpu.bind_weight("fc2.weight", w2.view());
  Executable gpu(*graph, kCuda);
  DeviceTensor dx(x), dw1(w1), db1(b1), dw2(w2);
  gpu.bind_weight("fc1.weight", dw1.view());
  gpu.bind_weight("fc1.bias", db1.view());
  gpu.bind_weight("fc2.weight", dw2.view());
  std::vector<HostTensor> want_cpu, want_gpu;
  std::vector<TensorView> cpu_outs, gpu_outs;
  std::vector<std::unique_ptr<DeviceTensor>> gpu_buffers;
  for (const TensorType& t : gpu.output_types()) {
    want_cpu.push_back(alloc_tensor(t));
    gpu_buffers.push_back(std::make_unique<DeviceTensor>(poisoned(t)));
    gpu_outs.push_back(gpu_buffers.back()->view());
  }
  for (HostTensor& t : want_cpu) cpu_outs.push_back(t.view());
  TensorView cpu_in[] = {x.view()}, gpu_in[] = {dx.view()};
  cpu.run(cpu_in, cpu_outs);
  gpu.run(gpu_in, gpu_outs);
  KILN_CUDA_OK(cudaDeviceSynchronize());
  for (size_t k = 0; k < gpu_buffers.size(); ++k) {
    want_gpu.push_back(gpu_buffers[k]->download());
    expect_match(want_gpu[k], want_cpu[k], str_cat("in-process output ", k));
  }

  const std::string path = temp_path("mlp_cuda.kiln");
  save_artifact(gpu, path);

  // The file holds the device weights' bytes (the transposed one in its layout).
  auto artifact = Artifact::open(path);
  EXPECT_EQ(artifact->metadata().at("device"), "cuda:0");
  const std::map<std::string, const HostTensor*> host = {{"fc1.weight", &w1}, {"fc1.bias", &b1}, {"fc2.weight", &w2}};
  for (const ArtifactWeight& w : artifact->weights()) {
    ASSERT_NE(w.data, nullptr) << w.key;
    ASSERT_EQ(w.bytes, static_cast<uint64_t>(host.at(w.key)->type.storage_bytes())) << w.key;
    EXPECT_TRUE(same_bytes(w.data, host.at(w.key)->data(), w.bytes)) << w.key;
  }

  const TensorRef x_ref{x.data(), ElementType::f32, {2, 4}};
  for (const char* device : {"cuda", "cpu"}) {
    SCOPED_TRACE(device);
    LoadOptions options;
    options.device = device;
    Program program = Program::load(path, options);
    EXPECT_EQ(program.device(), std::string(device) == "cuda" ? "cuda:0" : "cpu");
    const std::vector<HostTensor>& want = std::string(device) == "cuda" ? want_gpu : want_cpu;

    // Host in, host out (staged through the device on cuda).
    std::vector<Tensor> outs = program.run({x_ref});
    ASSERT_EQ(outs.size(), want.size());
    for (size_t k = 0; k < outs.size(); ++k)
      EXPECT_TRUE(same_bytes(outs[k].bytes.data(), want[k].data(), outs[k].bytes.size())) << "output " << k;

    // Memory on the program's device, as kiln bench uses it.
    DeviceMemory in = program.allocate(static_cast<size_t>(x.type.storage_bytes()));
    program.upload(in.data(), x.data(), in.size());
    std::vector<DeviceMemory> out_memory;
    std::vector<TensorRef> out_refs;
    for (const TensorInfo& o : program.outputs()) {
      out_memory.push_back(program.allocate(o.nbytes()));
      out_refs.push_back(TensorRef{out_memory.back().data(), o.dtype, o.shape, {}});
    }
    const TensorRef in_ref{in.data(), ElementType::f32, {2, 4}};
    program.run(std::span(&in_ref, 1), out_refs);
    for (size_t k = 0; k < out_refs.size(); ++k) {
      std::vector<std::byte> got(out_memory[k].size());
      program.download(got.data(), out_memory[k].data(), got.size());
      EXPECT_TRUE(same_bytes(got.data(), want[k].data(), got.size())) << "device-memory output " << k;
    }
  }
  std::filesystem::remove(path);
}

TEST(CudaArtifact, WeightLargerThanTheStagingBufferIsSavedExactly) {
  KILN_REQUIRE_CUDA();
  // Past 64 MiB and not a multiple of the chunk: two chunks, the second short.
  const int64_t n = (int64_t{64} << 20) / 4 + 1000 + 3;
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {1}));
  Value* w = g.add_weight("w", TensorType(DType::f32, {n}), "big");
  g.set_outputs({g.add_node(get_op("add"), {w, x})->outputs[0]});
  Executable gpu(g, kCuda);

  std::vector<uint32_t> bits(static_cast<size_t>(n));
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint32_t>(i) * 2654435761u;
  void* dw = nullptr;
  KILN_CUDA_OK(cudaMalloc(&dw, bits.size() * 4));
  KILN_CUDA_OK(cudaMemcpy(dw, bits.data(), bits.size() * 4, cudaMemcpyHostToDevice));
  gpu.bind_weight("big", TensorView(dw, TensorType(DType::f32, {n}), kCuda));

  const std::string path = temp_path("big_cuda.kiln");
  save_artifact(gpu, path);
  auto artifact = Artifact::open(path);  // checks the weight data's checksum too
  ASSERT_EQ(artifact->weights().size(), 1u);
  const ArtifactWeight& saved = artifact->weights()[0];
  ASSERT_EQ(saved.bytes, bits.size() * 4);
  EXPECT_TRUE(same_bytes(saved.data, bits.data(), saved.bytes));
  cudaFree(dw);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace kiln::test
