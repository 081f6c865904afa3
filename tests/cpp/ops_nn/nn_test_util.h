// Test helpers for the nn ops: host tensors with any strides, random fills,
// element access through double, and running one node's CPU kernel.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernel.h"
#include "ir/graph.h"
#include "ir/literal.h"
#include "ops/op_def.h"
#include "support/error.h"
#include "support/thread_pool.h"

namespace kiln::nn_test {

// Storage for one tensor of `type` (strided: the bytes span its layout).
struct HostTensor {
  TensorType type;
  std::vector<uint8_t> bytes;

  explicit HostTensor(TensorType t) : type(std::move(t)) {
    bytes.assign(static_cast<size_t>(std::max<int64_t>(type.storage_bytes(), 1)), 0);
  }
  TensorView view() { return TensorView(bytes.data(), type); }
  int64_t offset(const Dims& index) const {
    int64_t o = 0;
    for (size_t d = 0; d < index.size(); ++d) o += index[d] * type.strides[d];
    return o;
  }
  double at(const Dims& index) const {
    return load_scalar(bytes.data() + offset(index) * static_cast<int64_t>(dtype_size(type.dtype)), type.dtype);
  }
  void set(const Dims& index, double v) {
    store_scalar(bytes.data() + offset(index) * static_cast<int64_t>(dtype_size(type.dtype)), type.dtype, v);
  }
};

// Fills every storage slot (gaps of strided layouts too) with values in [lo, hi];
// integers and bools get whole numbers. The stored (rounded) values are what
// references read back through at().
inline void fill_random(HostTensor& t, std::mt19937& rng, double lo = -1.0, double hi = 1.0) {
  size_t elem = dtype_size(t.type.dtype);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (size_t i = 0; i + elem <= t.bytes.size(); i += elem) {
    double v = dist(rng);
    if (!is_floating(t.type.dtype)) v = std::round(v);
    store_scalar(t.bytes.data() + i, t.type.dtype, v);
  }
}

inline Dims unravel(int64_t flat, const Dims& dims) {
  Dims index(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    index[d] = dims[d] ? flat % dims[d] : 0;
    flat = dims[d] ? flat / dims[d] : 0;
  }
  return index;
}

// Index into an operand of `dims` broadcast (right-aligned) to an index of a larger shape.
inline Dims broadcast_index(const Dims& out_index, const Dims& dims) {
  Dims index(dims.size());
  size_t off = out_index.size() - dims.size();
  for (size_t d = 0; d < dims.size(); ++d) index[d] = dims[d] == 1 ? 0 : out_index[off + d];
  return index;
}

// Builds a graph with one input per tensor, adds `op`, runs its CPU kernel and
// returns its outputs (contiguous, types from inference).
inline std::vector<HostTensor> run_op(const std::string& op, std::vector<HostTensor*> inputs, Attrs attrs = {}) {
  Graph graph;
  std::vector<Value*> values;
  for (size_t i = 0; i < inputs.size(); ++i)
    values.push_back(graph.add_input("in" + std::to_string(i), inputs[i]->type));
  Node* node = graph.add_node(get_op(op), values, std::move(attrs));
  auto kernel = cpu::make_cpu_kernel(*node);
  std::vector<HostTensor> outputs;
  for (Value* v : node->outputs) outputs.emplace_back(v->type);
  std::vector<TensorView> in_views, out_views;
  for (HostTensor* t : inputs) in_views.push_back(t->view());
  for (HostTensor& t : outputs) out_views.push_back(t.view());
  cpu::CpuContext ctx{ThreadPool::global()};
  kernel->run(in_views, out_views, ctx);
  return outputs;
}

// Error message of building `op` over inputs of these types ("" when it builds).
inline std::string build_error(const std::string& op, std::vector<TensorType> types, Attrs attrs = {}) {
  Graph graph;
  std::vector<Value*> values;
  for (size_t i = 0; i < types.size(); ++i) values.push_back(graph.add_input("in" + std::to_string(i), types[i]));
  try {
    graph.add_node(get_op(op), values, std::move(attrs));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Tolerances by dtype: |got - want| <= atol + rtol * |want|.
struct Tolerance {
  double atol, rtol;
};
inline Tolerance tolerance_for(DType d) {
  switch (d) {
    case DType::f64: return {1e-10, 1e-10};
    case DType::f32: return {1e-5, 1e-4};
    case DType::f16: return {2e-3, 2e-3};
    case DType::bf16: return {1.5e-2, 1.5e-2};
    default: return {0, 0};
  }
}

// Compares a contiguous output with reference values in row-major order.
inline void expect_close(const HostTensor& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.type.numel(), static_cast<int64_t>(want.size())) << what;
  Tolerance tol = tolerance_for(got.type.dtype);
  int failures = 0;
  for (int64_t i = 0; i < got.type.numel(); ++i) {
    double g = got.at(unravel(i, got.type.dims)), w = want[static_cast<size_t>(i)];
    bool ok = (std::isnan(w) && std::isnan(g)) || std::abs(g - w) <= tol.atol + tol.rtol * std::abs(w);
    if (!ok && ++failures <= 5)
      ADD_FAILURE() << what << ": element " << i << " is " << g << ", want " << w << " (" << dtype_name(got.type.dtype)
                    << ")";
  }
  EXPECT_EQ(failures, 0) << what;
}

inline void expect_contains(const std::string& message, const std::string& fragment) {
  EXPECT_NE(message.find(fragment), std::string::npos) << "message: '" << message << "' lacks '" << fragment << "'";
}

}  // namespace kiln::nn_test
