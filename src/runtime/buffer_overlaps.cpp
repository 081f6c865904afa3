// BufferOverlapChecker: one sort and sweep per call, weights searched in a sorted list.
#include "runtime/buffer_overlaps.h"

#include <algorithm>
#include <utility>

namespace kiln {

ByteRange byte_range(const void* data, DType dtype, const Dims& dims, const Dims& strides) {
  auto begin = reinterpret_cast<uintptr_t>(data);
  return {begin, begin + static_cast<uintptr_t>(storage_bytes(dtype, dims, strides))};
}

void BufferOverlapChecker::resize_weights(size_t count) {
  weights_.assign(count, ByteRange{});
  weights_sorted_ = false;
}

void BufferOverlapChecker::set_weight(size_t index, ByteRange range) {
  weights_.at(index) = range;
  weights_sorted_ = false;
}

void BufferOverlapChecker::sort_weights() {
  sorted_weights_.clear();
  for (size_t i = 0; i < weights_.size(); ++i)
    if (!weights_[i].empty()) sorted_weights_.push_back({weights_[i], {BufferRole::weight, i}});
  std::sort(sorted_weights_.begin(), sorted_weights_.end(),
            [](const Entry& a, const Entry& b) { return a.range.begin < b.range.begin; });
  max_end_at_.resize(sorted_weights_.size());
  for (size_t i = 0; i < sorted_weights_.size(); ++i)
    max_end_at_[i] = i > 0 && sorted_weights_[max_end_at_[i - 1]].range.end >= sorted_weights_[i].range.end
                         ? max_end_at_[i - 1]
                         : i;
  weights_sorted_ = true;
}

// A weight overlaps [begin, end) when it starts before `end` and ends after `begin`: among the weights
// starting before `end`, the one that ends last decides.
std::optional<BufferOverlap> BufferOverlapChecker::find_weight(size_t output, ByteRange range) const {
  auto starts_before = std::partition_point(sorted_weights_.begin(), sorted_weights_.end(),
                                            [&](const Entry& w) { return w.range.begin < range.end; });
  const auto count = static_cast<size_t>(starts_before - sorted_weights_.begin());
  if (count == 0) return std::nullopt;
  const Entry& last_ending = sorted_weights_[max_end_at_[count - 1]];
  if (last_ending.range.end <= range.begin) return std::nullopt;
  return BufferOverlap{output, last_ending.ref};
}

std::optional<BufferOverlap> BufferOverlapChecker::find(std::span<const TensorView> outputs,
                                                        std::span<const TensorView> inputs) {
  if (!weights_sorted_) sort_weights();
  call_.clear();
  auto add = [&](std::span<const TensorView> views, BufferRole role) {
    for (size_t i = 0; i < views.size(); ++i) {
      ByteRange r = byte_range(views[i].data, views[i].dtype, views[i].dims, views[i].strides);
      if (!r.empty()) call_.push_back({r, {role, i}});
    }
  };
  add(outputs, BufferRole::output);
  add(inputs, BufferRole::input);
  for (const Entry& e : call_)
    if (e.ref.role == BufferRole::output)
      if (auto hit = find_weight(e.ref.index, e.range)) return hit;
  // Sorted by start, an entry overlaps an earlier one exactly when it starts before the largest end so far;
  // tracking the largest end among outputs and among all entries finds every overlap with an output in it.
  std::sort(call_.begin(), call_.end(), [](const Entry& a, const Entry& b) { return a.range.begin < b.range.begin; });
  const Entry* last_output = nullptr;  // the earlier output that ends last
  const Entry* last_any = nullptr;     // the earlier entry that ends last
  for (const Entry& e : call_) {
    const bool is_output = e.ref.role == BufferRole::output;
    const Entry* hit = last_output != nullptr && e.range.begin < last_output->range.end ? last_output
                       : is_output && last_any != nullptr && e.range.begin < last_any->range.end ? last_any
                                                                                               : nullptr;
    if (hit != nullptr) {
      // Name the output; of two outputs, the later one ("output 1 overlaps output 0").
      const Entry* out = &e;
      const Entry* other = hit;
      if (!is_output || (hit->ref.role == BufferRole::output && hit->ref.index > e.ref.index)) std::swap(out, other);
      return BufferOverlap{out->ref.index, other->ref};
    }
    if (is_output && (last_output == nullptr || e.range.end > last_output->range.end)) last_output = &e;
    if (last_any == nullptr || e.range.end > last_any->range.end) last_any = &e;
  }
  return std::nullopt;
}

}  // namespace kiln
