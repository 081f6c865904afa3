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
// On a device the host-side serialization is not enough: calls on different
// streams share the arena, so a call's kernels must not start before the
// previous call's have finished. Each call records a fence (a CUDA event) on
// its stream, and a call on another stream first makes its stream wait for
// that fence on the device (cudaStreamWaitEvent; the host never waits). One
// arena per stream would allow overlap but multiply the memory, and calls of
// one executable rarely overlap usefully; the fence keeps one arena. The
// caller still orders its own tensors: inputs must be ready on the call's
// stream, and outputs are ready on that stream only.
//
// CUDA graphs (ExecutableOptions::cuda_graphs): the first call runs eagerly
// (kernels that set themselves up on first use do it there), the second
// captures the whole call (kernels and output copies) into a graph, and every
// later call replays it on the caller's stream. Shapes are fixed per
// executable, so only addresses vary: an executable keeps up to
// kMaxCapturedCalls graphs, each for one set of pointers (inputs, outputs,
// weights), and replays the one whose pointers match. Several graphs matter
// because torch's caching allocator hands a loop's outputs back in a cycle
// (typically two addresses), which then replays without any update. A call
// with new pointers captures another graph while fewer are kept; past that,
// it either
//   - re-records the least recently used graph and applies it with
//     cudaGraphExecUpdate: host time for every launch, recorded instead of run;
//   - or runs through static slots: copies its inputs into kiln-owned slots,
//     replays one graph recorded on the slots, and copies the output slots
//     out: device time for the copies (and slot memory, the size of the inputs
//     and outputs, allocated on first use). Weights are never copied.
// Measured on an H200 (bench/cuda_graph_addresses.py, 12 Linear+GELU blocks,
// fp16, batch 8, torch 2.11, kiln at a8708f5, 2026-12-03): replay 0.086 ms per
// call; 8 inputs in turn: update 0.262, static slots 0.092, choose 0.096. Which is cheaper depends on the kernel count against the bytes
// moved, so by default (NewAddresses::choose) the first such call updates,
// timing the update, and later ones use slots when their estimated copy time
// is under that. A call that cannot be captured runs uncaptured, and the
// executable stays uncaptured, with the reason logged (KILN_LOG_LEVEL=warn)
// and in call_stats().
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
#include "runtime/buffer_overlaps.h"
#include "runtime/tensor_view.h"

namespace kiln {

// What a captured executable does for a call with pointers no kept graph has (the note above).
enum class NewAddresses { choose, update, slots };

struct ExecutableOptions {
  PlanOptions plan;
  std::shared_ptr<Allocator> allocator;  // null: the backend's default allocator
  bool cuda_graphs = true;               // replay calls as CUDA graphs (ignored on CPU)
  NewAddresses new_addresses = NewAddresses::choose;
  MathOptions math;                      // Note [Math modes]
};

// What an executable's calls did so far (tests and describe()).
struct CallStats {
  int64_t calls = 0;
  int64_t graph_captures = 0;  // graphs recorded and instantiated
  int64_t graph_updates = 0;   // re-recorded for new pointers and applied in place
  int64_t graph_replays = 0;   // calls run as a graph launch
  int64_t slot_calls = 0;      // of those, calls copied through static slots
  std::string uncaptured_reason;  // why calls run uncaptured (empty while graphs are used or untried)
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
  // run() with each output given by its address: a contiguous buffer of
  // output_types()[k] on this executable's device (the caller allocated it as
  // described, so only the addresses are checked).
  void run_into(std::span<const TensorView> inputs, std::span<void* const> outputs, Stream stream = {});
  // run_into() with each input given by its address too: the caller holds each input to
  // input_types()[k] (dtype, dims, strides) on this executable's device, so only the addresses are
  // checked. kiln's torch region takes this path for the tensors it checked itself (no DLPack export
  // per call: torch's __dlpack__ is Python, microseconds of host time the device waits for).
  void run_at(std::span<void* const> inputs, std::span<void* const> outputs, Stream stream = {});

  std::vector<TensorType> input_types() const;
  std::vector<TensorType> output_types() const;  // contiguous
  std::vector<std::string> weight_keys() const;  // distinct, in graph order
  const MemoryPlan& plan() const { return plan_; }
  const Graph& graph() const { return *graph_; }
  Device device() const { return device_; }
  const MathOptions& math() const { return options_.math; }
  // The arena, or null before the first call (or when the plan needs none).
  const void* arena_data() const { return arena_.data(); }
  // Where each bound weight points (key, pointer): the caller's own memory.
  std::vector<std::pair<std::string, const void*>> bound_weights() const;
  // Bytes of literal data the graph carries (small constants, never weights).
  int64_t literal_bytes() const;
  CallStats call_stats() const;
  // The kernel list and the memory plan, as text.
  std::string describe() const;
  // Where a compile's host time went, per kernel: lowering it (a cuDNN plan, a cuBLASLt heuristic, an NVRTC
  // source handed to the compile pool) and its launch in the first call (where a generated kernel waits for
  // its CUBIN and loads it). first_run_ms is negative before the first call.
  struct StepTiming {
    std::string node, kernel;
    double lower_ms = 0, first_run_ms = -1;
  };
  std::vector<StepTiming> step_timings() const;

 private:
  struct Step {
    const Node* node;
    std::unique_ptr<BackendKernel> kernel;
    std::vector<size_t> in, out;  // plan.values indices
    std::vector<TensorView> in_views, out_views;  // types fixed at build; pointers set per call
    double lower_ms = 0, first_run_ms = -1;  // host time (step_timings)
  };
  struct ViewStep {
    size_t value, source;
    int64_t byte_offset;
  };

  void build();
  void check_inputs(std::span<const TensorView> inputs) const;
  void check_outputs(std::span<const TensorView> outputs) const;
  // run() after the inputs' and outputs' types were checked (the mutex held).
  void run_checked(std::span<const TensorView> inputs, std::span<const TensorView> outputs, Stream stream);
  struct CapturedCall {
    std::vector<const void*> pointers;  // what `work` was recorded with
    std::unique_ptr<CapturedWork> work;
    int64_t last_use = 0;  // the call that last replayed it
  };

  // Points ptr_ (every plan value) at this call's inputs, outputs, weights and arena.
  void bind_pointers(std::span<const TensorView> inputs, std::span<const TensorView> outputs);
  // Enqueues the kernels and output copies with the pointers bound in ptr_.
  void enqueue(std::span<const TensorView> outputs, Stream stream);
  // Runs the bound call as a graph when it can (see the note above); false: run it eagerly.
  bool run_captured(std::span<const TensorView> inputs, std::span<const TensorView> outputs, Stream stream);
  // The call through static slots; false (pointers bound back to the call's own) when it cannot be captured.
  bool run_slotted(std::span<const TensorView> inputs, std::span<const TensorView> outputs, Stream stream);
  bool use_slots() const;
  // What identifies a recorded graph: every plan value's pointer (bound in ptr_) and the outputs'.
  std::vector<const void*> call_pointers(std::span<const TensorView> outputs) const;
  // The graph in `kept` recorded with `pointers` (call_pointers), or null.
  static CapturedCall* kept_graph(std::vector<CapturedCall>& kept, const std::vector<const void*>& pointers);
  // Records the bound call writing `outputs` into `kept`, updating its least recently used graph once it holds
  // `max_kept`; null when capture fails (the executable then stays uncaptured).
  CapturedCall* record_graph(std::vector<CapturedCall>& kept, size_t max_kept, std::vector<const void*> pointers,
                             std::span<const TensorView> outputs);

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
  BufferOverlapChecker overlaps_;  // the weights' byte ranges kept sorted for run()'s check
  std::vector<TensorView> output_views_;  // run_into's outputs: the output types, at the call's addresses
  std::vector<TensorView> input_views_;   // run_at's inputs: the input types, at the call's addresses
  std::vector<void*> ptr_;  // per plan value, for the call in progress
  DeviceBuffer arena_;
  DeviceBuffer literal_buffer_;  // device copies of the literals (not on CPU, where they are bound in place)
  std::unique_ptr<StreamFence> fence_;  // null on the CPU
  bool has_last_stream_ = false;
  void* last_stream_ = nullptr;  // the stream of the previous call
  static constexpr size_t kMaxCapturedCalls = 4;
  std::vector<CapturedCall> captured_;
  std::vector<CapturedCall> slotted_;  // at most one: the graph recorded on the slots
  std::vector<DeviceBuffer> slot_buffers_;  // inputs', then outputs'; allocated on first use
  std::vector<TensorView> slot_inputs_, slot_outputs_;
  double update_us_ = -1;  // host time of the last graph update; negative before one
  CallStats stats_;
  mutable std::mutex mutex_;
};

}  // namespace kiln
