// Element load/store by dtype through double.
#include "ir/literal.h"

#include <cstdint>
#include <cstring>

#include "support/half.h"

namespace kiln {

namespace {
template <typename T>
T read(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void write(void* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
}  // namespace

double load_scalar(const void* p, DType dtype) {
  switch (dtype) {
    case DType::f32: return read<float>(p);
    case DType::f64: return read<double>(p);
    case DType::f16: return static_cast<float>(read<Half>(p));
    case DType::bf16: return static_cast<float>(read<BFloat16>(p));
    case DType::i64: return static_cast<double>(read<int64_t>(p));
    case DType::i32: return read<int32_t>(p);
    case DType::i16: return read<int16_t>(p);
    case DType::i8: return read<int8_t>(p);
    case DType::u8: return read<uint8_t>(p);
    case DType::boolean: return read<uint8_t>(p) != 0 ? 1.0 : 0.0;
  }
  return 0;
}

double round_to(DType dtype, double v) {
  alignas(8) unsigned char element[8];  // the widest dtype
  store_scalar(element, dtype, v);
  return load_scalar(element, dtype);
}

void store_scalar(void* p, DType dtype, double v) {
  switch (dtype) {
    case DType::f32: write<float>(p, static_cast<float>(v)); break;
    case DType::f64: write<double>(p, v); break;
    case DType::f16: write<Half>(p, Half(static_cast<float>(v))); break;
    case DType::bf16: write<BFloat16>(p, BFloat16(static_cast<float>(v))); break;
    case DType::i64: write<int64_t>(p, static_cast<int64_t>(v)); break;
    case DType::i32: write<int32_t>(p, static_cast<int32_t>(v)); break;
    case DType::i16: write<int16_t>(p, static_cast<int16_t>(v)); break;
    case DType::i8: write<int8_t>(p, static_cast<int8_t>(v)); break;
    case DType::u8: write<uint8_t>(p, static_cast<uint8_t>(v)); break;
    case DType::boolean: write<uint8_t>(p, v != 0 ? 1 : 0); break;
  }
}

}  // namespace kiln
