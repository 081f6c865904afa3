// Shared helpers for the math op tests: host tensors of any dtype and layout
// (contiguous, or permuted and padded inside a larger buffer), random fills,
// naive multi-index iteration, running one node through its CPU kernel, and
// dtype-aware comparison against references computed in double.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernel.h"
#include "ir/graph.h"
#include "ir/literal.h"
#include "ops/op_def.h"
#include "runtime/tensor_view.h"
#include "support/error.h"
#include "support/thread_pool.h"

namespace kiln::test {

// Values a random tensor holds: continuous in +-[0.1, 2] (no values near 0, so
// reciprocals stay finite), or small integers in [-3, 3] (ties, zeros and
// exact comparisons). Unsigned and bool dtypes fold negatives into range.
enum class Fill { continuous, small_ints };

struct HostTensor {
  TensorType type;
  std::vector<uint64_t> words;  // 8-byte aligned backing storage

  void* data() { return words.data(); }
  const void* data() const { return words.data(); }
  TensorView view() { return TensorView(data(), type); }

  int64_t offset(const Dims& index) const {
    int64_t off = 0;
    for (size_t i = 0; i < index.size(); ++i) off += index[i] * type.strides[i];
    return off;
  }
  double at(const Dims& index) const {
    return load_scalar(static_cast<const uint8_t*>(data()) + offset(index) * dtype_size(type.dtype), type.dtype);
  }
  void set(const Dims& index, double v) {
    store_scalar(static_cast<uint8_t*>(data()) + offset(index) * dtype_size(type.dtype), type.dtype, v);
  }
};

// Calls fn(index) for every multi-index of `dims`, row-major.
inline void for_each_index(const Dims& dims, const std::function<void(const Dims&)>& fn) {
  for (int64_t d : dims)
    if (d == 0) return;
  Dims index(dims.size(), 0);
  for (;;) {
    fn(index);
    size_t d = dims.size();
    for (;;) {
      if (d == 0) return;
      --d;
      if (++index[d] < dims[d]) break;
      index[d] = 0;
    }
  }
}

inline HostTensor alloc_tensor(const TensorType& type) {
  HostTensor t;
  t.type = type;
  int64_t bytes = std::max<int64_t>(type.storage_bytes(), 8);
  t.words.assign(static_cast<size_t>((bytes + 7) / 8), 0);
  return t;
}

// A layout of `dims` that is neither contiguous nor dense: axis 0 moves
// fastest, every axis is padded by one element, and the innermost stride is 2.
inline Dims permuted_padded_strides(const Dims& dims) {
  Dims strides(dims.size());
  int64_t s = 2;
  for (size_t i = 0; i < dims.size(); ++i) {
    strides[i] = s;
    s *= dims[i] + 1;
  }
  return strides;
}

// A value representable in `dtype` for the given fill.
inline double random_value(DType dtype, Fill fill, std::mt19937& rng) {
  if (dtype == DType::boolean) return std::uniform_int_distribution<int>(0, 1)(rng);
  if (fill == Fill::small_ints || !is_floating(dtype)) {
    int v = std::uniform_int_distribution<int>(-3, 3)(rng);
    return dtype == DType::u8 ? v + 3 : v;
  }
  double u = std::uniform_real_distribution<double>(0.1, 2.0)(rng);
  return std::uniform_int_distribution<int>(0, 1)(rng) ? u : -u;
}

// Random tensor; `strided` puts it in a permuted, padded layout whose padding
// holds NaN (floats) or 99 so that reading outside the view shows.
inline HostTensor random_tensor(DType dtype, const Dims& dims, std::mt19937& rng, bool strided = false,
                                Fill fill = Fill::continuous) {
  TensorType type = strided ? TensorType(dtype, dims, permuted_padded_strides(dims)) : TensorType(dtype, dims);
  HostTensor t = alloc_tensor(type);
  int64_t n = static_cast<int64_t>(t.words.size() * 8 / dtype_size(dtype));
  for (int64_t i = 0; i < n; ++i)
    store_scalar(static_cast<uint8_t*>(t.data()) + i * dtype_size(dtype), dtype, is_floating(dtype) ? NAN : 99);
  for_each_index(dims, [&](const Dims& idx) { t.set(idx, random_value(dtype, fill, rng)); });
  return t;
}

// Runs `node` through its CPU kernel on `inputs`; returns fresh contiguous outputs.
inline std::vector<HostTensor> run_node(const Node& node, std::vector<HostTensor*> inputs) {
  auto kernel = cpu::make_cpu_kernel(node);
  std::vector<TensorView> in_views, out_views;
  for (HostTensor* t : inputs) in_views.push_back(t->view());
  std::vector<HostTensor> outs;
  for (const Value* v : node.outputs) outs.push_back(alloc_tensor(v->type));
  for (HostTensor& t : outs) out_views.push_back(t.view());
  kernel->run(in_views, out_views, cpu::CpuContext{ThreadPool::global()});
  return outs;
}

// Builds a one-node graph over `inputs` (their types, strides included) and runs it.
inline std::vector<HostTensor> run_op(const std::string& op, std::vector<HostTensor*> inputs, Attrs attrs = {},
                                      TensorType* out_type = nullptr) {
  Graph g;
  std::vector<Value*> values;
  for (size_t i = 0; i < inputs.size(); ++i) values.push_back(g.add_input("in" + std::to_string(i), inputs[i]->type));
  Node* node = g.add_node(get_op(op), values, std::move(attrs));
  if (out_type) *out_type = node->outputs[0]->type;
  return run_node(*node, std::move(inputs));
}

// The value `v` becomes when stored in an integer or bool dtype after integer
// arithmetic (two's-complement wrap), as the kernels' int64 compute does.
inline double wrap_integer(double v, DType dtype) {
  int64_t i = static_cast<int64_t>(v);
  switch (dtype) {
    case DType::i64: return static_cast<double>(i);
    case DType::i32: return static_cast<int32_t>(i);
    case DType::i16: return static_cast<int16_t>(i);
    case DType::i8: return static_cast<int8_t>(i);
    case DType::u8: return static_cast<uint8_t>(i);
    case DType::boolean: return i != 0 ? 1 : 0;
    default: return v;
  }
}

// Relative (and equal absolute) tolerance of results stored in `dtype`.
inline double tolerance(DType dtype) {
  switch (dtype) {
    case DType::f32: return 1e-5;
    case DType::f64: return 1e-11;
    case DType::f16: return 1e-3;
    case DType::bf16: return 1e-2;
    default: return 0;
  }
}

// Whether `actual` (stored in `dtype`) matches the double reference `expected`.
inline bool close_enough(double actual, double expected, DType dtype, double scale = 1.0) {
  if (std::isnan(expected)) return std::isnan(actual);
  if (std::isinf(expected)) return actual == expected;
  if (!is_floating(dtype)) return actual == wrap_integer(expected, dtype);
  double tol = tolerance(dtype) * scale;
  return std::fabs(actual - expected) <= tol + tol * std::fabs(expected);
}

// Compares every element of `out` with ref(index); reports the first few misses.
inline void expect_tensor(const HostTensor& out, const std::function<double(const Dims&)>& ref,
                          const std::string& what, double scale = 1.0) {
  int misses = 0;
  for_each_index(out.type.dims, [&](const Dims& idx) {
    double e = ref(idx), a = out.at(idx);
    if (!close_enough(a, e, out.type.dtype, scale) && ++misses <= 3)
      ADD_FAILURE() << what << " at [" << dims_to_string(idx) << "]: got " << a << ", expected " << e;
  });
  EXPECT_EQ(misses, 0) << what;
}

// Expects `fn` to throw kiln::Error whose message contains every fragment.
inline void expect_error(const std::function<void()>& fn, std::vector<std::string> fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing '" << fragments[0] << "'";
  } catch (const Error& e) {
    for (const std::string& f : fragments)
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << "message: " << e.what() << "\nmissing: " << f;
  }
}

}  // namespace kiln::test
