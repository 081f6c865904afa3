// Shared helpers for the data-op tests: owned tensors with random contents
// (optionally non-contiguous: a permuted layout inside a larger, offset
// buffer), element access by multi-index as double, naive index loops, and
// running one node's CPU kernel.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernel.h"
#include "backends/cpu/dtype_dispatch.h"
#include "ir/graph.h"
#include "ops/op_def.h"
#include "runtime/tensor_view.h"
#include "support/error.h"

namespace kiln::test {

// A tensor that owns its (8-byte aligned) storage; `view.data` may point past
// the storage's start and `view.strides` may be any layout inside it.
struct Owned {
  std::vector<uint64_t> storage;
  TensorView view;
};

inline Dims iota_dims(size_t n) {
  Dims d(n);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<int64_t>(i);
  return d;
}

// Calls fn(index) for every multi-index of dims, row-major.
inline void for_each_index(const Dims& dims, const std::function<void(const Dims&)>& fn) {
  for (int64_t d : dims)
    if (d == 0) return;
  Dims idx(dims.size(), 0);
  for (;;) {
    fn(idx);
    size_t k = dims.size();
    while (k > 0) {
      --k;
      if (++idx[k] < dims[k]) break;
      idx[k] = 0;
      if (k == 0) return;
    }
    if (dims.empty()) return;
  }
}

inline int64_t offset_of(const Dims& strides, const Dims& idx) {
  int64_t off = 0;
  for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * strides[i];
  return off;
}

// Element `idx` of a view, converted to double.
inline double get(const TensorView& v, const Dims& idx) {
  const int64_t off = offset_of(v.strides, idx);
  return cpu::dispatch_dtype(v.dtype, [&]<typename T>() {
    return static_cast<double>(cpu::to_compute(v.ptr<T>()[off]));
  });
}

// Element at a raw element offset from `data`.
inline double get_at(const void* data, DType dtype, int64_t off) {
  return cpu::dispatch_dtype(dtype, [&]<typename T>() {
    return static_cast<double>(cpu::to_compute(static_cast<const T*>(data)[off]));
  });
}

inline void set(const TensorView& v, const Dims& idx, double value) {
  const int64_t off = offset_of(v.strides, idx);
  cpu::dispatch_dtype(v.dtype, [&]<typename T>() { v.ptr<T>()[off] = cpu::from_compute<T>(value); });
}

// A random value exactly representable in every dtype's storage (small
// integers or multiples of 1/4), non-negative for u8, 0/1 for bool.
inline double random_value(std::mt19937& rng, DType dtype) {
  if (dtype == DType::boolean) return static_cast<double>(rng() % 2);
  if (dtype == DType::u8) return static_cast<double>(rng() % 200);
  const double v = static_cast<double>(static_cast<int>(rng() % 201) - 100);
  return is_floating(dtype) ? v / 4.0 : v;
}

// A contiguous tensor of random values.
inline Owned make_tensor(DType dtype, const Dims& dims, uint32_t seed = 1) {
  Owned t;
  const int64_t n = std::max<int64_t>(numel(dims), 1);
  t.storage.assign(static_cast<size_t>((n * static_cast<int64_t>(dtype_size(dtype)) + 7) / 8), 0);
  t.view = TensorView(t.storage.data(), TensorType(dtype, dims));
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < numel(dims); ++i) {
    double v = random_value(rng, dtype);
    cpu::dispatch_dtype(dtype, [&]<typename T>() { t.view.ptr<T>()[i] = cpu::from_compute<T>(v); });
  }
  return t;
}

// A non-contiguous tensor: axes laid out in storage in the order `storage_order`
// (outermost first), each padded by 2 elements, starting 3 elements into a
// buffer that is filled with random values everywhere (padding included).
inline Owned make_strided(DType dtype, const Dims& dims, const Dims& storage_order, uint32_t seed = 2) {
  const size_t rank = dims.size();
  Dims phys(rank);
  for (size_t k = 0; k < rank; ++k) phys[k] = dims[static_cast<size_t>(storage_order[k])] + 2;
  Dims phys_strides = contiguous_strides(phys);
  Dims strides(rank);
  for (size_t k = 0; k < rank; ++k) strides[static_cast<size_t>(storage_order[k])] = phys_strides[k];
  const int64_t lead = 3, total = numel(phys) + lead;
  Owned t = make_tensor(dtype, {total}, seed);
  t.view.data = static_cast<char*>(t.view.data) + lead * static_cast<int64_t>(dtype_size(dtype));
  t.view.dims = dims;
  t.view.strides = strides;
  return t;
}

// A contiguous, zero-filled buffer for a type.
inline Owned alloc(const TensorType& type) {
  Owned t;
  const int64_t bytes = std::max<int64_t>(type.storage_bytes(), 8);
  t.storage.assign(static_cast<size_t>((bytes + 7) / 8), 0);
  t.view = TensorView(t.storage.data(), type);
  return t;
}

// Runs node's CPU kernel on `inputs`; outputs are allocated from the node's output types.
inline std::vector<Owned> run_node(const Node* node, const std::vector<TensorView>& inputs) {
  auto kernel = cpu::make_cpu_kernel(*node);
  std::vector<Owned> outs;
  std::vector<TensorView> out_views;
  for (const Value* v : node->outputs) outs.push_back(alloc(v->type));
  for (const Owned& o : outs) out_views.push_back(o.view);
  cpu::CpuContext ctx{ThreadPool::global()};
  kernel->run(inputs, out_views, ctx);
  return outs;
}

// Builds a graph with one input per view and one node of `op`; returns the node.
inline Node* add_op(Graph& g, const std::string& op, const std::vector<TensorView>& inputs, Attrs attrs = {},
                    const std::string& name = "") {
  std::vector<Value*> values;
  for (size_t i = 0; i < inputs.size(); ++i) values.push_back(g.add_input(g.fresh_name("in"), inputs[i].type()));
  return g.add_node(get_op(op), values, std::move(attrs), name);
}

inline Attrs attrs_of(std::initializer_list<std::pair<std::string, AttrValue>> items) {
  Attrs a;
  for (const auto& [k, v] : items) a.set(k, v);
  return a;
}

// Expects `fn` to throw kiln::Error whose message contains every fragment.
template <typename Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string> fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected kiln::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
  }
}

}  // namespace kiln::test
