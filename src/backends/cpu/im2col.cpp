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
              const T* line = plane + h * sh;
              int64_t w = ow * g.stride_w - g.pad_w + j * g.dilation_w;
              for (int64_t q = 0; q < run; ++q, w += g.stride_w)
                out[p + q] = (w >= 0 && w < g.in_w) ? line[w * sw] : T{};
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
