// Executable: build (plan, lower), bind and run.
#include "runtime/executable.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <sstream>

#include "memory/plan_verifier.h"
#include "ops/op_def.h"
#include "support/error.h"
#include "support/log.h"

namespace kiln {

namespace {

// Strides that address the same elements: equal wherever the dim is not 1
// (a dim of size 1 is never stepped along), or the tensor is empty.
bool same_layout(const Dims& dims, const Dims& a, const Dims& b) {
  if (a.size() != b.size()) return false;
  if (numel(dims) == 0) return true;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != 1 && a[i] != b[i]) return false;
  return true;
}

// Checks `got` against `expected` for the tensor that `what()` names (built
// only for the message of a failed check); `contiguous` asks for a
// contiguous layout instead of expected's strides.
template <typename What>
void check_tensor(const What& what, const TensorView& got, const TensorType& expected, Device device,
                  bool contiguous) {
  KILN_CHECK(got.device == device, what(), " is on ", to_string(got.device), ", expected ", to_string(device));
  KILN_CHECK(got.dtype == expected.dtype, what(), " has dtype ", dtype_name(got.dtype), ", expected ",
             dtype_name(expected.dtype));
  KILN_CHECK(got.dims.size() == expected.rank(), what(), " has rank ", got.dims.size(), " (dims [",
             dims_to_string(got.dims), "]), expected rank ", expected.rank(), " (dims [", dims_to_string(expected.dims),
             "])");
  KILN_CHECK(got.dims == expected.dims, what(), " has dims [", dims_to_string(got.dims), "], expected [",
             dims_to_string(expected.dims), "]");
  KILN_CHECK(got.strides.size() == got.dims.size(), what(), " has ", got.strides.size(), " strides for rank ",
             got.dims.size());
  if (contiguous) {
    KILN_CHECK(is_contiguous(got.dims, got.strides), what(), " has strides [", dims_to_string(got.strides),
               "], expected a contiguous buffer (strides [", dims_to_string(contiguous_strides(got.dims)), "])");
  } else {
    KILN_CHECK(same_layout(got.dims, got.strides, expected.strides), what(), " has strides [",
               dims_to_string(got.strides), "], expected [", dims_to_string(expected.strides), "]");
  }
  KILN_CHECK(got.data != nullptr || got.numel() == 0, what(), " has a null data pointer");
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Executable::Executable(std::unique_ptr<Graph> graph, Device device, ExecutableOptions options)
    : graph_(std::move(graph)), device_(device), options_(std::move(options)) {
  KILN_CHECK(graph_ != nullptr, "Executable: null graph");
  build();
}

Executable::Executable(const Graph& graph, Device device, ExecutableOptions options)
    : Executable(graph.clone(), device, std::move(options)) {}

Executable::~Executable() = default;

void Executable::build() {
  backend_ = make_backend(device_);
  fence_ = backend_->make_fence();
  allocator_ = options_.allocator ? options_.allocator : backend_->default_allocator();
  KILN_CHECK(allocator_->device() == device_, "Executable: allocator is for ", to_string(allocator_->device()),
             " but the executable runs on ", to_string(device_));
  if (options_.allocator != nullptr) backend_->use_allocator(allocator_);
  backend_->set_math(options_.math);
  plan_ = plan_memory(*graph_, options_.plan);
  verify_memory_plan(*graph_, plan_);
  ptr_.assign(plan_.values.size(), nullptr);

  const auto& weights = graph_->weights();
  weight_data_.assign(weights.size(), nullptr);
  weight_bound_.assign(weights.size(), false);
  overlaps_.resize_weights(weights.size());
  for (const Value* v : graph_->outputs())
    output_views_.emplace_back(nullptr, TensorType(v->type.dtype, v->type.dims), device_);
  for (const Value* v : graph_->inputs()) input_views_.emplace_back(nullptr, v->type, device_);
  for (size_t i = 0; i < weights.size(); ++i) weights_by_key_[weights[i]->weight_key].push_back(static_cast<int>(i));

  for (const Node* node : graph_->nodes()) {
    if (!node->outputs.empty() && plan_.at(node->outputs[0]).storage == Storage::view) {
      const ValuePlan& first = plan_.at(node->outputs[0]);
      KILN_CHECK(node->outputs.size() == 1, "node '", node->name, "': view op '", node->op->name,
                 "' has more than one output");
      const Value* src = first.source;
      views_.push_back(ViewStep{plan_.index.at(first.value), plan_.index.at(src),
                                first.view_offset * static_cast<int64_t>(dtype_size(src->type.dtype))});
      continue;
    }
    Step step;
    step.node = node;
    const auto lower_start = std::chrono::steady_clock::now();
    step.kernel = backend_->lower(*node);
    step.lower_ms = ms_since(lower_start);
    for (const Value* v : node->inputs) {
      step.in.push_back(plan_.index.at(v));
      step.in_views.emplace_back(nullptr, v->type, device_);
    }
    for (const Value* v : node->outputs) {
      step.out.push_back(plan_.index.at(v));
      step.out_views.emplace_back(nullptr, v->type, device_);
    }
    steps_.push_back(std::move(step));
  }
  // Literals never move: bind them once. Off the CPU they are uploaded once,
  // at build time, into one buffer from the allocator.
  if (device_.kind == DeviceKind::cpu) {
    for (const Value* lit : graph_->literals())
      ptr_[plan_.index.at(lit)] = const_cast<uint8_t*>(lit->literal_data.data());
    return;
  }
  constexpr size_t kLiteralAlign = 256;
  size_t total = 0;
  for (const Value* lit : graph_->literals())
    total += (lit->literal_data.size() + kLiteralAlign - 1) / kLiteralAlign * kLiteralAlign;
  if (total == 0) return;
  literal_buffer_ = allocator_->allocate(total, kLiteralAlign);
  size_t at = 0;
  for (const Value* lit : graph_->literals()) {
    void* dst = static_cast<uint8_t*>(literal_buffer_.data()) + at;
    backend_->upload(dst, lit->literal_data.data(), lit->literal_data.size());
    ptr_[plan_.index.at(lit)] = dst;
    at += (lit->literal_data.size() + kLiteralAlign - 1) / kLiteralAlign * kLiteralAlign;
  }
}

void Executable::bind_weight(const std::string& key, const TensorView& view) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = weights_by_key_.find(key);
  if (it == weights_by_key_.end()) {
    std::string known;
    for (const std::string& k : weight_keys()) known += (known.empty() ? "'" : ", '") + k + "'";
    fail(ErrorKind::invalid_argument, "bind_weight: the graph has no weight '", key, "' (weights: ",
         known.empty() ? "none" : known, ")");
  }
  for (int i : it->second) {
    const Value* w = graph_->weights()[i];
    check_tensor([&] { return str_cat("bind_weight: weight '", key, "' (%", w->name, ")"); }, view, w->type, device_,
                 false);
  }
  for (int i : it->second) {
    const TensorType& t = graph_->weights()[i]->type;
    weight_data_[i] = view.data;
    weight_bound_[i] = true;
    overlaps_.set_weight(static_cast<size_t>(i), byte_range(view.data, t.dtype, t.dims, t.strides));
  }
}

void Executable::check_inputs(std::span<const TensorView> inputs) const {
  const auto& in = graph_->inputs();
  KILN_CHECK(inputs.size() == in.size(), "run: expected ", in.size(), " inputs, got ", inputs.size());
  for (size_t k = 0; k < in.size(); ++k)
    check_tensor([&] { return str_cat("run: input ", k, " (%", in[k]->name, ")"); }, inputs[k], in[k]->type, device_,
                 false);
}

void Executable::check_outputs(std::span<const TensorView> outputs) const {
  const auto& out = graph_->outputs();
  KILN_CHECK(outputs.size() == out.size(), "run: expected ", out.size(), " output buffers, got ", outputs.size());
  for (size_t k = 0; k < out.size(); ++k)
    check_tensor([&] { return str_cat("run: output ", k, " (%", out[k]->name, ")"); }, outputs[k], out[k]->type,
                 device_, true);
}

void Executable::run(std::span<const TensorView> inputs, std::span<const TensorView> outputs, Stream stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_inputs(inputs);
  check_outputs(outputs);
  run_checked(inputs, outputs, stream);
}

namespace {

// Puts `addresses` into `views` (the types of the executable's inputs or outputs); `what` names them in errors.
void bind_addresses(std::span<void* const> addresses, std::vector<TensorView>& views, const char* call,
                    const char* what) {
  KILN_CHECK(addresses.size() == views.size(), call, ": expected ", views.size(), " ", what, " addresses, got ",
             addresses.size());
  for (size_t k = 0; k < addresses.size(); ++k) {
    views[k].data = addresses[k];
    KILN_CHECK(addresses[k] != nullptr || views[k].numel() == 0, call, ": ", what, " ", k, " has a null address");
  }
}

}  // namespace

void Executable::run_into(std::span<const TensorView> inputs, std::span<void* const> outputs, Stream stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_inputs(inputs);
  bind_addresses(outputs, output_views_, "run_into", "output");
  run_checked(inputs, output_views_, stream);
}

void Executable::run_at(std::span<void* const> inputs, std::span<void* const> outputs, Stream stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  bind_addresses(inputs, input_views_, "run_at", "input");
  bind_addresses(outputs, output_views_, "run_at", "output");
  run_checked(input_views_, output_views_, stream);
}

void Executable::run_checked(std::span<const TensorView> inputs, std::span<const TensorView> outputs, Stream stream) {
  const auto& weights = graph_->weights();
  for (size_t i = 0; i < weights.size(); ++i)
    KILN_CHECK(weight_bound_[i], "run: weight '", weights[i]->weight_key, "' (%", weights[i]->name,
               ") is not bound (call bind_weight first)");
  // An output buffer that overlaps another output, an input or a weight would
  // be written while something still reads it: refuse rather than corrupt.
  if (std::optional<BufferOverlap> hit = overlaps_.find(outputs, inputs)) {
    const size_t j = hit->other.index;
    switch (hit->other.role) {
      case BufferRole::output:
        fail(ErrorKind::invalid_argument, "run: output ", hit->output, " overlaps output ", j,
             " in memory (each output needs its own buffer)");
      case BufferRole::input:
        fail(ErrorKind::invalid_argument, "run: output ", hit->output, " overlaps input ", j, " (%",
             graph_->inputs()[j]->name, ") in memory");
      case BufferRole::weight:
        fail(ErrorKind::invalid_argument, "run: output ", hit->output, " overlaps weight '", weights[j]->weight_key,
             "' in memory");
    }
  }
  if (plan_.arena_bytes > 0 && arena_.data() == nullptr)
    arena_ = allocator_->allocate(static_cast<size_t>(plan_.arena_bytes), static_cast<size_t>(plan_.alignment));

  bind_pointers(inputs, outputs);

  // Calls on another stream than the previous one wait for it on the device
  // (the arena is shared; see the thread-safety note in executable.h).
  if (fence_ != nullptr && has_last_stream_ && last_stream_ != stream.handle) fence_->wait(stream);
  ++stats_.calls;
  if (!run_captured(inputs, outputs, stream)) enqueue(outputs, stream);
  if (fence_ != nullptr) {
    fence_->record(stream);
    has_last_stream_ = true;
    last_stream_ = stream.handle;
  }
}

void Executable::bind_pointers(std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  auto* arena = static_cast<uint8_t*>(arena_.data());
  for (size_t i = 0; i < plan_.values.size(); ++i) {
    const ValuePlan& p = plan_.values[i];
    switch (p.storage) {
      case Storage::input: ptr_[i] = inputs[p.index].data; break;
      case Storage::weight: ptr_[i] = weight_data_[p.index]; break;
      case Storage::output: ptr_[i] = outputs[p.index].data; break;
      case Storage::arena: ptr_[i] = arena + p.offset; break;
      case Storage::literal:
      case Storage::view: break;
    }
  }
  for (const ViewStep& v : views_) ptr_[v.value] = static_cast<uint8_t*>(ptr_[v.source]) + v.byte_offset;
}

void Executable::enqueue(std::span<const TensorView> outputs, Stream stream) {
  const bool first = stats_.calls == 1;  // the first call times each launch (step_timings)
  for (Step& step : steps_) {
    for (size_t j = 0; j < step.in.size(); ++j) step.in_views[j].data = ptr_[step.in[j]];
    for (size_t j = 0; j < step.out.size(); ++j) step.out_views[j].data = ptr_[step.out[j]];
    const auto start = first ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    step.kernel->run(step.in_views, step.out_views, stream);
    if (first) step.first_run_ms = ms_since(start);
  }
  for (const OutputCopy& c : plan_.output_copies) {
    const Value* src = c.source;
    backend_->copy(outputs[c.output_index], TensorView(ptr_[plan_.index.at(src)], src->type, device_), stream);
  }
}

bool Executable::run_captured(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
                              Stream stream) {
  if (!options_.cuda_graphs || device_.kind == DeviceKind::cpu || !stats_.uncaptured_reason.empty()) return false;
  if (steps_.empty() && plan_.output_copies.empty()) return false;
  if (stats_.calls == 1) return false;  // the first call runs eagerly: kernels set themselves up there
  std::vector<const void*> pointers = call_pointers(outputs);
  CapturedCall* call = kept_graph(captured_, pointers);
  if (call == nullptr && captured_.size() >= kMaxCapturedCalls && use_slots()) return run_slotted(inputs, outputs, stream);
  if (call == nullptr) call = record_graph(captured_, kMaxCapturedCalls, std::move(pointers), outputs);
  if (call == nullptr) return false;
  call->last_use = stats_.calls;
  call->work->replay(stream);
  ++stats_.graph_replays;
  return true;
}

std::vector<const void*> Executable::call_pointers(std::span<const TensorView> outputs) const {
  std::vector<const void*> pointers(ptr_.begin(), ptr_.end());
  for (const TensorView& out : outputs) pointers.push_back(out.data);
  return pointers;
}

bool Executable::use_slots() const {
  if (options_.new_addresses != NewAddresses::choose) return options_.new_addresses == NewAddresses::slots;
  if (update_us_ < 0) return false;  // the first call past the kept graphs updates one, timing it
  // The copies' device time, estimated: a few microseconds a copy, and the bytes read and written at
  // 1 TB/s (under half of an H100's or H200's memory bandwidth, so slots are not chosen optimistically).
  constexpr double kCopyUs = 3.0, kBytesPerUs = 1e6;
  double copy_us = 0;
  for (const Value* v : graph_->inputs()) copy_us += kCopyUs + static_cast<double>(v->type.storage_bytes()) / kBytesPerUs;
  for (const Value* v : graph_->outputs()) copy_us += kCopyUs + static_cast<double>(v->type.storage_bytes()) / kBytesPerUs;
  return copy_us < update_us_;
}

bool Executable::run_slotted(std::span<const TensorView> inputs, std::span<const TensorView> outputs, Stream stream) {
  if (slot_buffers_.empty()) {
    auto slot = [&](const TensorType& type) {
      size_t bytes = std::max(static_cast<size_t>(type.storage_bytes()), static_cast<size_t>(plan_.alignment));
      slot_buffers_.push_back(allocator_->allocate(bytes, static_cast<size_t>(plan_.alignment)));
      return TensorView(slot_buffers_.back().data(), type, device_);
    };
    for (const Value* v : graph_->inputs()) slot_inputs_.push_back(slot(v->type));
    for (const Value* v : graph_->outputs()) slot_outputs_.push_back(slot(TensorType(v->type.dtype, v->type.dims)));
  }
  bind_pointers(slot_inputs_, slot_outputs_);
  std::vector<const void*> pointers = call_pointers(slot_outputs_);
  CapturedCall* call = kept_graph(slotted_, pointers);
  if (call == nullptr) call = record_graph(slotted_, 1, std::move(pointers), slot_outputs_);
  if (call == nullptr) {
    bind_pointers(inputs, outputs);
    return false;
  }
  // A slot has its tensor's layout (check_inputs and check_outputs hold the caller's to it), so the bytes
  // of the storage span copy as one block, whatever the strides (a channels-last input stays one).
  auto bytes_at = [&](const void* data, const TensorView& slot) {
    return TensorView(const_cast<void*>(data), TensorType(DType::u8, {slot.type().storage_bytes()}), device_);
  };
  for (size_t k = 0; k < inputs.size(); ++k)
    backend_->copy(bytes_at(slot_inputs_[k].data, slot_inputs_[k]), bytes_at(inputs[k].data, slot_inputs_[k]), stream);
  call->work->replay(stream);
  for (size_t k = 0; k < outputs.size(); ++k)
    backend_->copy(bytes_at(outputs[k].data, slot_outputs_[k]), bytes_at(slot_outputs_[k].data, slot_outputs_[k]),
                   stream);
  ++stats_.graph_replays;
  ++stats_.slot_calls;
  return true;
}

Executable::CapturedCall* Executable::kept_graph(std::vector<CapturedCall>& kept,
                                                 const std::vector<const void*>& pointers) {
  for (CapturedCall& c : kept)
    if (c.pointers == pointers) return &c;
  return nullptr;
}

Executable::CapturedCall* Executable::record_graph(std::vector<CapturedCall>& kept, size_t max_kept,
                                                   std::vector<const void*> pointers,
                                                   std::span<const TensorView> outputs) {
  auto body = [&](Stream s) { enqueue(outputs, s); };
  std::string why;
  if (kept.size() >= max_kept) {
    CapturedCall* call = &*std::min_element(
        kept.begin(), kept.end(), [](const CapturedCall& a, const CapturedCall& b) { return a.last_use < b.last_use; });
    auto start = std::chrono::steady_clock::now();
    bool updated = call->work->update(body, &why);
    update_us_ = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    if (updated) {
      ++stats_.graph_updates;
      call->pointers = std::move(pointers);
      return call;
    }
    log_at(LogLevel::info, "executable: graph update failed (", why, "); capturing anew");
    kept.erase(kept.begin() + (call - kept.data()));
  }
  std::unique_ptr<CapturedWork> work = backend_->capture(body, &why);
  if (work == nullptr) {
    stats_.uncaptured_reason = why.empty() ? "capture failed" : why;
    captured_.clear();
    slotted_.clear();
    log_at(LogLevel::warn, "executable on ", to_string(device_), " runs without CUDA graphs: ",
           stats_.uncaptured_reason);
    return nullptr;
  }
  ++stats_.graph_captures;
  kept.push_back(CapturedCall{std::move(pointers), std::move(work), 0});
  return &kept.back();
}

CallStats Executable::call_stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::vector<TensorType> Executable::input_types() const {
  std::vector<TensorType> types;
  for (const Value* v : graph_->inputs()) types.push_back(v->type);
  return types;
}

std::vector<TensorType> Executable::output_types() const {
  std::vector<TensorType> types;
  for (const Value* v : graph_->outputs()) types.emplace_back(v->type.dtype, v->type.dims);
  return types;
}

std::vector<std::string> Executable::weight_keys() const {
  std::vector<std::string> keys;
  for (const Value* w : graph_->weights())
    if (std::find(keys.begin(), keys.end(), w->weight_key) == keys.end()) keys.push_back(w->weight_key);
  return keys;
}

std::vector<Executable::StepTiming> Executable::step_timings() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<StepTiming> out;
  out.reserve(steps_.size());
  for (const Step& s : steps_) out.push_back({s.node->name, s.kernel->describe(), s.lower_ms, s.first_run_ms});
  return out;
}

std::string Executable::describe() const {
  std::ostringstream out;
  out << "executable on " << to_string(device_) << ": " << steps_.size() << " kernels, " << views_.size()
      << " views, " << plan_.output_copies.size() << " output copies";
  if (device_.kind != DeviceKind::cpu)
    out << (!options_.cuda_graphs                   ? ", CUDA graphs off"
            : stats_.uncaptured_reason.empty() ? ", CUDA graphs on"
                                               : ", uncaptured: " + stats_.uncaptured_reason);
  if (options_.math != MathOptions{}) out << ", math " << to_string(options_.math);
  out << "\n";
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    out << "  " << i << ": ";
    for (size_t j = 0; j < s.node->outputs.size(); ++j) out << (j ? ", %" : "%") << s.node->outputs[j]->name;
    out << " = " << s.node->op->name << "(";
    for (size_t j = 0; j < s.node->inputs.size(); ++j) out << (j ? ", %" : "%") << s.node->inputs[j]->name;
    out << ")  [" << s.kernel->describe() << "]\n";
  }
  out << to_string(plan_);
  return out.str();
}

std::vector<std::pair<std::string, const void*>> Executable::bound_weights() const {
  std::vector<std::pair<std::string, const void*>> out;
  const auto& weights = graph_->weights();
  for (size_t i = 0; i < weights.size(); ++i)
    if (weight_bound_[i]) out.emplace_back(weights[i]->weight_key, weight_data_[i]);
  return out;
}

int64_t Executable::literal_bytes() const {
  int64_t total = 0;
  for (const Value* v : graph_->literals()) total += static_cast<int64_t>(v->literal_data.size());
  return total;
}

}  // namespace kiln
