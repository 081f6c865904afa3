// Whether a call's output buffers overlap each other, one of its inputs or a
// bound weight: a call that would write memory it still reads (or two results
// into the same bytes). Executable::run refuses such a call. Checked on every
// call, so it costs a sort of the call's own buffers (outputs and inputs, a
// few dozen) plus a binary search per output among the weights' ranges, which
// are kept sorted between calls and re-sorted only after a bind: comparing
// every output with every weight was GPT-2's 25 outputs against 148 weights
// on each call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "runtime/tensor_view.h"

namespace kiln {

struct ByteRange {
  uintptr_t begin = 0, end = 0;  // [begin, end); empty when begin == end
  bool empty() const { return begin >= end; }
};

// The bytes a strided tensor at `data` spans from its first element (empty
// when it has no elements).
ByteRange byte_range(const void* data, DType dtype, const Dims& dims, const Dims& strides);

enum class BufferRole : uint8_t { output, input, weight };

struct BufferRef {
  BufferRole role = BufferRole::output;
  size_t index = 0;  // among the call's outputs or inputs, or the graph's weights
};

// An output and something it overlaps (another output has the lower index).
struct BufferOverlap {
  size_t output = 0;
  BufferRef other;
};

class BufferOverlapChecker {
 public:
  // The weights' ranges by weight index; a bind changes one.
  void resize_weights(size_t count);
  void set_weight(size_t index, ByteRange range);

  // The first overlap found that involves an output, or none.
  std::optional<BufferOverlap> find(std::span<const TensorView> outputs, std::span<const TensorView> inputs);

 private:
  struct Entry {
    ByteRange range;
    BufferRef ref;
  };
  void sort_weights();
  std::optional<BufferOverlap> find_weight(size_t output, ByteRange range) const;

  std::vector<ByteRange> weights_;   // by weight index
  std::vector<Entry> sorted_weights_;  // non-empty ranges, by begin
  std::vector<size_t> max_end_at_;    // which of sorted_weights_[0..i] ends last
  bool weights_sorted_ = false;
  std::vector<Entry> call_;  // this call's outputs and inputs (kept to reuse its capacity)
};

}  // namespace kiln
