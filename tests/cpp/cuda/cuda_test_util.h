// Helpers for the CUDA backend tests: skip without a usable device, device
// copies of the host tensors of ops_math/math_test_util.h (strides and
// padding included, so strided reads are tested), running one node through
// the CUDA backend on a stream of its own, and comparing against the CPU
// reference kernel's outputs.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "../ops_math/math_test_util.h"
#include "runtime/backend.h"

namespace kiln::test {

#define KILN_REQUIRE_CUDA()                                             \
  do {                                                                  \
    std::string why_;                                                   \
    if (!::kiln::cuda_available(&why_)) GTEST_SKIP() << "no CUDA: " << why_; \
  } while (0)

#define KILN_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

// Device memory holding a HostTensor's whole backing storage, `shift` bytes
// into its allocation (a shift misaligns the data for the vector paths).
struct DeviceTensor {
  TensorType type;
  void* data = nullptr;
  void* allocation = nullptr;
  size_t bytes = 0;

  explicit DeviceTensor(const HostTensor& h, size_t shift = 0) : type(h.type), bytes(h.words.size() * 8) {
    EXPECT_EQ(cudaMalloc(&allocation, bytes + shift), cudaSuccess);
    data = static_cast<char*>(allocation) + shift;
    EXPECT_EQ(cudaMemcpy(data, h.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    // From pageable memory cudaMemcpy may return before its DMA lands, and the
    // tests launch on non-blocking streams, which do not wait for it: wait here.
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  ~DeviceTensor() { cudaFree(allocation); }

  TensorView view() const { return TensorView(data, type, Device{DeviceKind::cuda, 0}); }
  HostTensor download() const {
    HostTensor h = alloc_tensor(type);
    EXPECT_EQ(cudaMemcpy(h.data(), data, std::min(bytes, h.words.size() * 8), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

// A host tensor of `type` poisoned with NaN (floats) or 77, so unwritten outputs show.
inline HostTensor poisoned(const TensorType& type) {
  HostTensor t = alloc_tensor(type);
  int64_t n = static_cast<int64_t>(t.words.size() * 8 / dtype_size(type.dtype));
  for (int64_t i = 0; i < n; ++i)
    store_scalar(static_cast<uint8_t*>(t.data()) + i * dtype_size(type.dtype), type.dtype,
                 is_floating(type.dtype) ? NAN : 77);
  return t;
}

// Runs `node` through the CUDA backend (cuda:0) on a fresh stream, every
// input and output `shift` bytes into its allocation.
inline std::vector<HostTensor> run_node_cuda(const Node& node, const std::vector<HostTensor*>& inputs,
                                             size_t shift = 0) {
  auto backend = make_backend(Device{DeviceKind::cuda, 0});
  auto kernel = backend->lower(node);
  std::vector<std::unique_ptr<DeviceTensor>> ins, outs;
  std::vector<TensorView> in_views, out_views;
  for (HostTensor* t : inputs) {
    ins.push_back(std::make_unique<DeviceTensor>(*t, shift));
    in_views.push_back(ins.back()->view());
  }
  for (const Value* v : node.outputs) {
    outs.push_back(std::make_unique<DeviceTensor>(poisoned(v->type), shift));
    out_views.push_back(outs.back()->view());
  }
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  kernel->run(in_views, out_views, Stream{stream});
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);
  std::vector<HostTensor> result;
  for (auto& d : outs) result.push_back(d->download());
  return result;
}

// Expects `got` to match the CPU reference `want` element by element.
inline void expect_match(const HostTensor& got, const HostTensor& want, const std::string& what, double scale = 1.0) {
  ASSERT_EQ(got.type.dims, want.type.dims) << what;
  expect_tensor(got, [&](const Dims& idx) { return want.at(idx); }, what, scale);
}

// Builds a one-node graph over the inputs' types and checks CUDA (tensors
// `shift` bytes into their allocations) against CPU. Returns false (and
// checks nothing) when the op rejects these inputs.
inline bool check_op(const std::string& op, std::vector<HostTensor*> inputs, Attrs attrs, const std::string& what,
                     double scale = 1.0, size_t shift = 0) {
  Graph g;
  std::vector<Value*> values;
  for (size_t i = 0; i < inputs.size(); ++i) values.push_back(g.add_input("in" + std::to_string(i), inputs[i]->type));
  Node* node = nullptr;
  try {
    node = g.add_node(get_op(op), values, std::move(attrs));
  } catch (const Error&) {
    return false;
  }
  if (!cpu::cpu_supports(*node, nullptr)) return false;
  std::vector<HostTensor> want = run_node(*node, inputs);
  std::vector<HostTensor> got = run_node_cuda(*node, inputs, shift);
  for (size_t k = 0; k < want.size(); ++k) expect_match(got[k], want[k], what + " output " + std::to_string(k), scale);
  return true;
}

}  // namespace kiln::test
