// im2col (see im2col.h): one row of the column matrix per (channel, i, j),
// rows filled in parallel; each row walks the output positions of its range.
#include "backends/cpu/im2col.h"

#include <algorithm>
#include <type_traits>

#include "backends/cpu/dtype_dispatch.h"

namespace kiln::cpu {

void im2col(DType dtype, const void* x, int64_t channels, int64_t sc, int64_t sh, int64_t sw, const ConvGeometry& g,
            int64_t p_begin, int64_t p_end, void* cols, ThreadPool& pool) {
  const int64_t width = p_end - p_begin;
  const int64_t rows = channels * g.kernel_h * g.kernel_w;
  if (width <= 0 || rows == 0) return;
  dispatch_dtype(dtype, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      const T* src = static_cast<const T*>(x);
      T* dst = static_cast<T*>(cols);
      pool.parallel_for(rows, std::max<int64_t>(1, 16384 / width), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t j = r % g.kernel_w;
          const int64_t i = (r / g.kernel_w) % g.kernel_h;
          const int64_t c = r / (g.kernel_w * g.kernel_h);
          const T* plane = src + c * sc;
          T* out = dst + r * width;
          int64_t oh = p_begin / g.out_w, ow = p_begin % g.out_w;
          for (int64_t p = 0; p < width;) {
            // The rest of output row `oh` inside this range.
            const int64_t run = std::min(width - p, g.out_w - ow);
            const int64_t h = oh * g.stride_h - g.pad_h + i * g.dilation_h;
            if (h < 0 || h >= g.in_h) {
              std::fill(out + p, out + p + run, T{});
            } else {
              // Output q of the run reads input column w0 + q * stride_w: zeros (padding) before lo
              // and from hi on, a plain copy between when the columns are adjacent.
              const T* line = plane + h * sh;
              const int64_t w0 = ow * g.stride_w - g.pad_w + j * g.dilation_w;
              const int64_t lo = w0 >= 0 ? 0 : std::min(run, (g.stride_w - 1 - w0) / g.stride_w);
              const int64_t last = g.in_w - 1 - w0;  // the largest q * stride_w still inside
              const int64_t hi = std::max(lo, last < 0 ? int64_t{0} : std::min(run, last / g.stride_w + 1));
              std::fill(out + p, out + p + lo, T{});
              std::fill(out + p + hi, out + p + run, T{});
              const T* first = line + (w0 + lo * g.stride_w) * sw;
              const int64_t step = g.stride_w * sw;
              if (step == 1) {
                std::copy(first, first + (hi - lo), out + p + lo);
              } else {
                for (int64_t q = lo; q < hi; ++q) out[p + q] = first[(q - lo) * step];
              }
            }
            p += run;
            ow = 0;
            ++oh;
          }
        }
      });
    }
  });
}

}  // namespace kiln::cpu
