// Strided copies and fills by element size (see data_copy.h). Axes are
// coalesced first so that permuted-but-dense and contiguous layouts run as
// few long rows; a fully contiguous pair becomes memcpy, and rows contiguous
// in both operands one memcpy each.
#include "backends/cpu/data_copy.h"

#include <cstring>

#include "backends/cpu/dtype_dispatch.h"
#include "backends/cpu/strided_loop.h"
#include "support/error.h"

namespace kiln::cpu::internal {

namespace {

// A fixed-size byte blob: moved with one load and one store.
template <size_t N>
struct Bytes {
  uint8_t b[N];
};

template <typename Fn>
decltype(auto) dispatch_size(size_t elem_size, Fn&& fn) {
  switch (elem_size) {
    case 1: return fn.template operator()<Bytes<1>>();
    case 2: return fn.template operator()<Bytes<2>>();
    case 4: return fn.template operator()<Bytes<4>>();
    case 8: return fn.template operator()<Bytes<8>>();
    default: fail(ErrorKind::runtime, "unsupported element size ", elem_size);
  }
}

}  // namespace

void copy_range(const Dims& dims, const void* src, const Dims& src_strides, void* dst, const Dims& dst_strides,
                size_t elem_size, int64_t begin, int64_t end) {
  if (begin >= end) return;
  const size_t rank = dims.size();
  // Rows contiguous in both (a permute that keeps the last axis, such as splitting attention heads):
  // one memcpy a row, walking only the outer axes.
  constexpr int64_t kMinRow = 16;
  if (rank >= 2 && src_strides[rank - 1] == 1 && dst_strides[rank - 1] == 1 && dims[rank - 1] >= kMinRow) {
    const int64_t row = dims[rank - 1];
    const Dims outer(dims.begin(), dims.end() - 1);
    const Dims outer_src(src_strides.begin(), src_strides.end() - 1), outer_dst(dst_strides.begin(), dst_strides.end() - 1);
    const int64_t first = begin / row, last = (end - 1) / row;
    const auto bytes = static_cast<int64_t>(elem_size);
    const auto* s = static_cast<const uint8_t*>(src);
    auto* d = static_cast<uint8_t*>(dst);
    int64_t r = first;
    for_each_offset<2>(outer, {&outer_src, &outer_dst}, first, last + 1, [&](const std::array<int64_t, 2>& o) {
      const int64_t lo = r == first ? begin - r * row : 0, hi = r == last ? end - r * row : row;
      std::memcpy(d + (o[1] + lo) * bytes, s + (o[0] + lo) * bytes, static_cast<size_t>((hi - lo) * bytes));
      ++r;
    });
    return;
  }
  dispatch_size(elem_size, [&]<typename T>() {
    const T* s = static_cast<const T*>(src);
    T* d = static_cast<T*>(dst);
    for_each_offset<2>(dims, {&src_strides, &dst_strides}, begin, end,
                       [&](const std::array<int64_t, 2>& o) { d[o[1]] = s[o[0]]; });
  });
}

void strided_copy(ThreadPool& pool, const Dims& dims_in, const void* src, const Dims& src_strides_in, void* dst,
                  const Dims& dst_strides_in, size_t elem_size) {
  const int64_t n = numel(dims_in);
  if (n == 0) return;
  Dims dims = dims_in, ss = src_strides_in, ds = dst_strides_in;
  coalesce_axes<2>(dims, {&ss, &ds});
  if (dims.empty() || (dims.size() == 1 && ss[0] == 1 && ds[0] == 1)) {
    const auto* s = static_cast<const uint8_t*>(src);
    auto* d = static_cast<uint8_t*>(dst);
    pool.parallel_for(n, kCopyGrain * 4, [&](int64_t b, int64_t e) {
      std::memcpy(d + b * elem_size, s + b * elem_size, static_cast<size_t>(e - b) * elem_size);
    });
    return;
  }
  pool.parallel_for(n, kCopyGrain, [&](int64_t b, int64_t e) { copy_range(dims, src, ss, dst, ds, elem_size, b, e); });
}

void strided_fill(ThreadPool& pool, const Dims& dims_in, void* dst, const Dims& dst_strides_in, const void* value,
                  size_t elem_size) {
  const int64_t n = numel(dims_in);
  if (n == 0) return;
  Dims dims = dims_in, ds = dst_strides_in;
  coalesce_axes<1>(dims, {&ds});
  dispatch_size(elem_size, [&]<typename T>() {
    T v;
    std::memcpy(&v, value, sizeof(T));
    T* d = static_cast<T*>(dst);
    if (dims.empty() || (dims.size() == 1 && ds[0] == 1)) {
      pool.parallel_for(n, kCopyGrain * 4, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) d[i] = v;
      });
      return;
    }
    pool.parallel_for(n, kCopyGrain, [&](int64_t b, int64_t e) {
      for_each_offset<1>(dims, {&ds}, b, e, [&](const std::array<int64_t, 1>& o) { d[o[0]] = v; });
    });
  });
}

std::array<uint8_t, 8> scalar_bytes(double v, DType dtype) {
  std::array<uint8_t, 8> out{};
  dispatch_dtype(dtype, [&]<typename T>() {
    T x = convert_scalar<T>(v);
    static_assert(sizeof(T) <= 8);
    std::memcpy(out.data(), &x, sizeof(T));
  });
  return out;
}

}  // namespace kiln::cpu::internal
