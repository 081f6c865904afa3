// A strided GEMM front end for the CPU kernels (matmul, conv2d): C = A @ B
// with A and B given by pointer and element strides. f32/f64 go to OpenBLAS
// (cblas_sgemm/dgemm, single-threaded, with kiln's pool running large products
// in column or row pieces); an operand with a unit stride in
// either dim is passed as it is with the matching transpose flag, so a
// transposed weight (permute view, strides [1, K]) is never copied (Note
// [Weights] in DESIGN.md). Only an operand with no unit stride (or overlapping
// rows) is materialized, and gemm_operand_copies() counts those for tests.
// f16/bf16 convert bounded panels of A and B to f32 scratch per call, run
// sgemm, and round C once to the output dtype. Integers use a plain loop with
// int64 accumulation (wrapping like torch), threaded over rows.
#pragma once

#include <cstdint>

#include "ir/dtype.h"
#include "support/thread_pool.h"

namespace kiln::cpu {

// Element (r, c) of a matrix lives at data + (r * row_stride + c * col_stride) elements.
struct MatrixRef {
  const void* data = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
};

// C[m, n] = A[m, k] @ B[k, n], or C += A @ B when `accumulate`. All three have
// `dtype`; C is row-major with row stride ldc (elements) and unit column
// stride. Any dtype but bool. k == 0 gives zeros (or leaves C when accumulating).
void gemm(DType dtype, int64_t m, int64_t n, int64_t k, MatrixRef a, MatrixRef b, void* c, int64_t ldc,
          bool accumulate, ThreadPool& pool);

// How many operands gemm() has materialized into a contiguous copy because they
// had no unit stride, since the process started (tests prove the transposed
// weight path copies nothing). Conversions of f16/bf16 panels do not count.
int64_t gemm_operand_copies();

}  // namespace kiln::cpu
