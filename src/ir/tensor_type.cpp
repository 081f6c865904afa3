// TensorType helpers.
#include "ir/tensor_type.h"

#include <sstream>

namespace kiln {

Dims contiguous_strides(const Dims& dims) {
  Dims strides(dims.size());
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = s;
    s *= dims[i] > 0 ? dims[i] : 1;
  }
  return strides;
}

int64_t numel(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

bool TensorType::is_contiguous() const { return kiln::is_contiguous(dims, strides); }

bool is_contiguous(const Dims& dims, const Dims& strides) {
  // Dims of size 1 may carry any stride; an empty tensor is contiguous.
  if (numel(dims) == 0) return true;
  int64_t expected = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    if (dims[i] != 1 && strides[i] != expected) return false;
    expected *= dims[i];
  }
  return true;
}

int64_t TensorType::storage_bytes() const { return kiln::storage_bytes(dtype, dims, strides); }

int64_t storage_bytes(DType dtype, const Dims& dims, const Dims& strides) {
  if (numel(dims) == 0) return 0;
  int64_t last = 0;
  for (size_t i = 0; i < dims.size(); ++i) last += (dims[i] - 1) * strides[i];
  return (last + 1) * static_cast<int64_t>(dtype_size(dtype));
}

std::string dims_to_string(const Dims& dims) {
  std::ostringstream out;
  for (size_t i = 0; i < dims.size(); ++i) out << (i ? "," : "") << dims[i];
  return out.str();
}

std::string to_string(const TensorType& type) {
  std::string s = std::string(dtype_name(type.dtype)) + "[" + dims_to_string(type.dims) + "]";
  if (type.strides != contiguous_strides(type.dims)) s += "{" + dims_to_string(type.strides) + "}";
  return s;
}

}  // namespace kiln
