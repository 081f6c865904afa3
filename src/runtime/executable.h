// Executable: a graph made runnable on one device. Built once from a graph
// (after passes): plans memory, lowers every compute node to a backend kernel
// and keeps the literals. Each call binds the caller's inputs and output
// buffers by pointer, runs the kernels in order with intermediates in one
// arena allocated once, and performs the plan's output copies.
//
// Weights are bound by pointer (Note [Weights] in DESIGN.md): bind_weight
// stores the caller's pointer, never copies; the caller keeps the storage
// alive while the executable may run, and in-place updates to it are seen by
// the next call.
//
// Thread safety: one Executable runs one call at a time. run() and
// bind_weight() take an internal mutex, so concurrent calls are serialized,
// not parallel; use one Executable per thread for parallel calls.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "memory/memory_plan.h"
#include "runtime/allocator.h"
#include "runtime/backend.h"
#include "runtime/tensor_view.h"

namespace kiln {

struct ExecutableOptions {
  PlanOptions plan;
  std::shared_ptr<Allocator> allocator;  // null: the backend's default allocator
};

class Executable {
 public:
  // Takes the graph (it must stay unchanged; the executable owns it).
  explicit Executable(std::unique_ptr<Graph> graph, Device device = {}, ExecutableOptions options = {});
  // Works on a copy of `graph`.
  explicit Executable(const Graph& graph, Device device = {}, ExecutableOptions options = {});
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // Binds every weight value whose key is `key` to the caller's memory. The
  // view's dtype, dims, strides (ignoring dims of size 1) and device must
  // match the graph's weight; errors name the weight.
  void bind_weight(const std::string& key, const TensorView& view);

  // Runs one call. `inputs` match input_types() (dtype, dims, strides, device);
  // `outputs` are contiguous buffers of output_types() that receive the results.
  // Errors name the input or output at fault and say what was expected.
  // On a device, the work is enqueued on `stream` (Note [Streams] in
  // runtime/backend.h) and run() returns without waiting for it; the arena is
  // allocated on the first call. The caller orders later work on that stream.
  void run(std::span<const TensorView> inputs, std::span<const TensorView> outputs, Stream stream = {});

  std::vector<TensorType> input_types() const;
  std::vector<TensorType> output_types() const;  // contiguous
  std::vector<std::string> weight_keys() const;  // distinct, in graph order
  const MemoryPlan& plan() const { return plan_; }
  const Graph& graph() const { return *graph_; }
  Device device() const { return device_; }
  // The arena, or null before the first call (or when the plan needs none).
  const void* arena_data() const { return arena_.data(); }
  // Where each bound weight points (key, pointer): the caller's own memory.
  std::vector<std::pair<std::string, const void*>> bound_weights() const;
  // Bytes of literal data the graph carries (small constants, never weights).
  int64_t literal_bytes() const;
  // The kernel list and the memory plan, as text.
  std::string describe() const;

 private:
  struct Step {
    const Node* node;
    std::unique_ptr<BackendKernel> kernel;
    std::vector<size_t> in, out;  // plan.values indices
    std::vector<TensorView> in_views, out_views;  // types fixed at build; pointers set per call
  };
  struct ViewStep {
    size_t value, source;
    int64_t byte_offset;
  };

  void build();
  void check_inputs(std::span<const TensorView> inputs) const;
  void check_outputs(std::span<const TensorView> outputs) const;

  std::unique_ptr<Graph> graph_;
  Device device_;
  ExecutableOptions options_;
  std::unique_ptr<Backend> backend_;
  std::shared_ptr<Allocator> allocator_;
  MemoryPlan plan_;
  std::vector<Step> steps_;
  std::vector<ViewStep> views_;
  std::unordered_map<std::string, std::vector<int>> weights_by_key_;  // key -> weight indices
  std::vector<void*> weight_data_;  // per weight index; null until bound
  std::vector<bool> weight_bound_;
  std::vector<void*> ptr_;  // per plan value, for the call in progress
  DeviceBuffer arena_;
  DeviceBuffer literal_buffer_;  // device copies of the literals (not on CPU, where they are bound in place)
  std::mutex mutex_;
};

}  // namespace kiln
