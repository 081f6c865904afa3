// Test helper: runs a Graph node by node with the CPU kernels (views bound by
// offset and strides, Note [Views are resolved by the runtime]) and returns
// each graph output as contiguous bytes. Independent of the runtime, so pass
// tests can compare a graph before and after a pass.
#pragma once

#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backends/cpu/cpu_kernel.h"
#include "backends/cpu/strided_loop.h"
#include "ir/graph.h"
#include "ops/op_def.h"
#include "ops/view_offset.h"

namespace kiln::test {

using Bytes = std::vector<uint8_t>;

// inputs: one buffer per graph input, laid out by the input's strides
// (storage_bytes long); weights: by weight_key.
inline std::vector<Bytes> interpret(const Graph& g, const std::vector<Bytes>& inputs,
                                    const std::map<std::string, Bytes>& weights = {}) {
  std::unordered_map<const Value*, TensorView> views;
  std::vector<std::unique_ptr<Bytes>> owned;
  for (size_t i = 0; i < g.inputs().size(); ++i)
    views[g.inputs()[i]] = TensorView(const_cast<uint8_t*>(inputs.at(i).data()), g.inputs()[i]->type);
  for (const Value* w : g.weights())
    views[w] = TensorView(const_cast<uint8_t*>(weights.at(w->weight_key).data()), w->type);
  for (const Value* l : g.literals()) views[l] = TensorView(const_cast<uint8_t*>(l->literal_data.data()), l->type);
  for (const Node* n : g.nodes()) {
    if (n->op->has(kView)) {
      const TensorView& in = views.at(n->inputs[0]);
      auto* base = static_cast<uint8_t*>(in.data) + view_offset(*n) * static_cast<int64_t>(dtype_size(in.dtype));
      views[n->outputs[0]] = TensorView(base, n->outputs[0]->type);
      continue;
    }
    std::vector<TensorView> ins, outs;
    for (const Value* v : n->inputs) ins.push_back(views.at(v));
    for (const Value* v : n->outputs) {
      owned.push_back(std::make_unique<Bytes>(static_cast<size_t>(v->type.numel()) * dtype_size(v->type.dtype)));
      views[v] = TensorView(owned.back()->data(), TensorType(v->type.dtype, v->type.dims));
      outs.push_back(views[v]);
    }
    cpu::make_cpu_kernel(*n)->run(ins, outs, cpu::CpuContext{ThreadPool::global()});
  }
  std::vector<Bytes> results;
  for (const Value* v : g.outputs()) {
    const TensorView& view = views.at(v);
    const size_t size = dtype_size(view.dtype);
    Bytes out(static_cast<size_t>(view.numel()) * size);
    int64_t i = 0;
    cpu::for_each_offset<1>(view.dims, {&view.strides}, 0, view.numel(), [&](const std::array<int64_t, 1>& o) {
      const uint8_t* src = static_cast<const uint8_t*>(view.data) + o[0] * static_cast<int64_t>(size);
      std::memcpy(out.data() + static_cast<size_t>(i++) * size, src, size);
    });
    results.push_back(std::move(out));
  }
  return results;
}

}  // namespace kiln::test
