// A non-owning view of tensor memory: pointer, dtype, dims, strides (elements)
// and device. Kernels read and write through these; weights and inputs arrive
// as TensorViews built from DLPack tensors, never copied.
#pragma once

#include <cstdint>

#include "ir/tensor_type.h"

namespace kiln {

enum class DeviceKind : uint8_t { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;
  bool operator==(const Device&) const = default;
};

std::string to_string(Device d);  // "cpu", "cuda:0"

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  Dims dims;
  Dims strides;
  Device device;

  TensorView() = default;
  TensorView(void* p, const TensorType& t, Device dev = {})
      : data(p), dtype(t.dtype), dims(t.dims), strides(t.strides), device(dev) {}

  TensorType type() const { return TensorType(dtype, dims, strides); }
  int64_t numel() const { return kiln::numel(dims); }
  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data);
  }
};

}  // namespace kiln
