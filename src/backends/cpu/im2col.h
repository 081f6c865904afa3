// im2col for 2-D convolution: unfolds the input patches of a range of output
// positions into a matrix so the convolution becomes one GEMM per group. The
// input plane may be strided; padding reads as zero.
#pragma once

#include <cstdint>

#include "ir/dtype.h"
#include "support/thread_pool.h"

namespace kiln::cpu {

struct ConvGeometry {
  int64_t in_h = 0, in_w = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t out_h = 0, out_w = 0;
};

// For output positions p in [p_begin, p_end) (p = oh * out_w + ow), writes
//   cols[((c * kernel_h + i) * kernel_w + j) * (p_end - p_begin) + (p - p_begin)]
//     = x[c, oh * stride_h - pad_h + i * dilation_h, ow * stride_w - pad_w + j * dilation_w]
// (zero outside the input) for c in [0, channels). x points at channel 0 of the
// plane group; element (c, h, w) is at x + c * sc + h * sh + w * sw. `dtype` is
// the element type of both x and cols (any floating dtype).
void im2col(DType dtype, const void* x, int64_t channels, int64_t sc, int64_t sh, int64_t sw, const ConvGeometry& g,
            int64_t p_begin, int64_t p_end, void* cols, ThreadPool& pool);

}  // namespace kiln::cpu
