// The static type of a tensor value: dtype, dims and strides (in elements).
// Node outputs are contiguous unless the op is a view; graph inputs and weights
// carry the strides of the tensor bound to them. Dims are concrete today; a
// symbolic batch dimension would replace int64_t dims by a Dim (value or symbol).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace kiln {

using Dims = std::vector<int64_t>;

Dims contiguous_strides(const Dims& dims);
int64_t numel(const Dims& dims);
// Whether strides are the row-major ones for dims (ignoring dims of size 1; empty is contiguous).
bool is_contiguous(const Dims& dims, const Dims& strides);
// Bytes a strided layout spans from its first element (0 for empty tensors); TensorType::storage_bytes.
int64_t storage_bytes(DType dtype, const Dims& dims, const Dims& strides);

struct TensorType {
  DType dtype = DType::f32;
  Dims dims;
  Dims strides;  // same rank as dims; elements, not bytes

  TensorType() = default;
  TensorType(DType d, Dims shape) : dtype(d), dims(std::move(shape)), strides(contiguous_strides(dims)) {}
  TensorType(DType d, Dims shape, Dims st) : dtype(d), dims(std::move(shape)), strides(std::move(st)) {}

  size_t rank() const { return dims.size(); }
  int64_t numel() const { return kiln::numel(dims); }
  bool is_contiguous() const;
  // Bytes spanned by the strided layout from the first element (0 for empty tensors).
  int64_t storage_bytes() const;

  bool operator==(const TensorType&) const = default;
};

// "f32[2,3]" for contiguous types, "f32[2,3]{1,2}" when strides differ from contiguous.
std::string to_string(const TensorType& type);
std::string dims_to_string(const Dims& dims);

}  // namespace kiln
