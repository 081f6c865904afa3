// The strided GEMM front end (see gemm.h): layout classification onto BLAS
// transpose flags, f16/bf16 panels through sgemm, and the integer loop.
#include "backends/cpu/gemm.h"

#include <cblas.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backends/cpu/dtype_dispatch.h"
#include "support/error.h"

// OpenBLAS's thread control, when the BLAS is OpenBLAS (weak: another CBLAS lacks it).
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace kiln::cpu {

namespace {

std::atomic<int64_t> g_operand_copies{0};

// How BLAS reads one operand of `rows` x `cols`: row-major (NoTrans) or
// column-major (Trans) with leading dimension `ld`, or not at all.
struct BlasLayout {
  bool ok = false;
  bool transposed = false;
  int64_t ld = 0;
};

BlasLayout classify(const MatrixRef& m, int64_t rows, int64_t cols) {
  // Dims of size 1 may carry any stride.
  if (cols == 1 || m.col_stride == 1) {
    int64_t ld = rows == 1 ? std::max<int64_t>(cols, 1) : m.row_stride;
    if (ld >= std::max<int64_t>(cols, 1)) return {true, false, ld};
  }
  if (rows == 1 || m.row_stride == 1) {
    int64_t ld = cols == 1 ? std::max<int64_t>(rows, 1) : m.col_stride;
    if (ld >= std::max<int64_t>(rows, 1)) return {true, true, ld};
  }
  return {};
}

void check_blas_int(int64_t v, const char* what) {
  KILN_CHECK_KIND(unsupported, v <= INT_MAX, "gemm: ", what, " ", v, " exceeds the BLAS integer range");
}

// y = op(M) x through BLAS's matrix-vector product: `rows` x `cols` row-major M with leading dimension `ld`,
// read transposed when `transposed`; x and y strided.
template <typename T>
void blas_gemv(bool transposed, int64_t rows, int64_t cols, const T* mat, int64_t ld, const T* x, int64_t incx, T* y,
               int64_t incy, T beta) {
  auto flag = transposed ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemv(CblasRowMajor, flag, int(rows), int(cols), 1.0f, mat, int(ld), x, int(incx), beta, y, int(incy));
  else
    cblas_dgemv(CblasRowMajor, flag, int(rows), int(cols), 1.0, mat, int(ld), x, int(incx), beta, y, int(incy));
}

// Products with at most this many rows go through matrix-vector products (see blas_gemm). On the dev CPU
// (2-core EPYC, OpenBLAS 0.3.21) they beat sgemm on GPT-2's layer shapes at 2 and 4 rows, tie at 8 and
// lose at 16.
constexpr int64_t kFewRows = 4;
constexpr int64_t kCachedBlockBytes = 128 * 1024;

template <typename T>
void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
               T* c, int64_t ldc, bool accumulate) {
  auto ta_flag = ta ? CblasTrans : CblasNoTrans;
  auto tb_flag = tb ? CblasTrans : CblasNoTrans;
  T beta = accumulate ? T(1) : T(0);
  // A few rows of C are matrix-vector products, one per row: sgemm would first pack the whole matrix operand
  // (a decoding step's weight) into its panels, reading and writing it once more than the product needs
  // (one-row products ran at 16 GB/s through sgemm on the dev CPU, 44 through sgemv). Over more than one
  // row, B goes in blocks of about kCachedBlockBytes that its rows' products read in turn, the first from
  // memory and the others from the cache: blocks of C's columns when B is stored n x k (a Linear's
  // weight), of the contraction when it is stored k x n (each block then whole rows of B, added into C).
  if (m <= kFewRows) {  // c[r][j] = sum_p a[r][p] b[p][j]: b^T x per row, x being A's row
    const int64_t incx = ta ? lda : 1;
    const int64_t span = tb ? n : k;
    const int64_t block = m == 1 ? span : std::max<int64_t>(4, kCachedBlockBytes / (int64_t(sizeof(T)) * (tb ? k : n)));
    for (int64_t i0 = 0; i0 < span; i0 += block) {
      const int64_t size = std::min(block, span - i0);
      for (int64_t r = 0; r < m; ++r) {
        const T* x = ta ? a + r : a + r * lda;
        if (tb)  // columns i0.. of C from rows i0.. of b (n x k)
          blas_gemv<T>(false, size, k, b + i0 * ldb, ldb, x, incx, c + r * ldc + i0, 1, beta);
        else  // rows i0.. of b (k x n) times x[i0..], added into C after the first block
          blas_gemv<T>(true, size, n, b + i0 * ldb, ldb, x + i0 * incx, incx, c + r * ldc, 1, i0 == 0 ? beta : T(1));
      }
    }
    return;
  }
  if (n == 1) {  // c[i] = sum_p a[i][p] b[p]: A x, x being B's column; C's column strided by ldc
    const int64_t incx = tb ? 1 : ldb;
    if (ta)
      blas_gemv<T>(true, k, m, a, lda, b, incx, c, ldc, beta);  // a is stored k x m
    else
      blas_gemv<T>(false, m, k, a, lda, b, incx, c, ldc, beta);  // a is stored m x k
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta_flag, tb_flag, int(m), int(n), int(k), 1.0f, a, int(lda), b, int(ldb), beta, c,
                int(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta_flag, tb_flag, int(m), int(n), int(k), 1.0, a, int(lda), b, int(ldb), beta, c,
                int(ldc));
  }
}

// BLAS runs single-threaded and kiln's pool splits the product instead: a threaded OpenBLAS keeps its
// workers spinning (sched_yield) between calls, taking cores from the pool's elementwise work that
// follows each product (a quarter of all CPU samples on GPT-2 and ResNet-50 on 2 cores). The setting
// is OpenBLAS's process-wide one: another user of the same libopenblas in the process (not torch,
// which uses MKL, nor pip's numpy, which bundles its own) would run single-threaded too.
void use_single_threaded_blas() {
  static const bool once = [] {
    if (openblas_set_num_threads != nullptr) openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

// Least work per piece of a split product: below it the pool's dispatch costs more than it saves. A
// product with few rows (a decoding step's, one row per sequence) is bound by reading the weight, not by
// arithmetic: a core streams about 800 KB in the time it computes 4e6 flops, so bytes count as well.
constexpr double kMinFlopsPerPiece = 4e6;
constexpr double kMinBytesPerPiece = 8e5;

// How many pieces of the pool a product of `element_bytes` operands is worth splitting into (1: none).
int64_t split_pieces(int64_t m, int64_t n, int64_t k, size_t element_bytes, ThreadPool& pool) {
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const double bytes = static_cast<double>(element_bytes) * static_cast<double>(m * k + k * n + m * n);
  return std::clamp<int64_t>(static_cast<int64_t>(std::max(flops / kMinFlopsPerPiece, bytes / kMinBytesPerPiece)), 1,
                             pool.size());
}

// C = A @ B through BLAS, in column pieces (or row pieces when C is tall) run on the pool. Each piece
// is the same product over a slice of C, so every element is summed as by one call.
template <typename T>
void blas_gemm_parallel(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
                        int64_t ldb, T* c, int64_t ldc, bool accumulate, ThreadPool& pool) {
  for (int64_t v : {m, n, k, lda, ldb, ldc}) check_blas_int(v, "size");
  use_single_threaded_blas();
  const int64_t pieces = split_pieces(m, n, k, sizeof(T), pool);
  if (pieces <= 1) {
    blas_gemm<T>(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
    return;
  }
  const bool by_columns = n >= m;
  const int64_t span = by_columns ? n : m;
  constexpr int64_t kAlign = 16;  // pieces start on whole register tiles of the BLAS kernels
  const int64_t grain = ((span + pieces - 1) / pieces + kAlign - 1) / kAlign * kAlign;
  pool.parallel_for(span, grain, [&](int64_t p0, int64_t p1) {
    if (by_columns)
      blas_gemm<T>(ta, tb, m, p1 - p0, k, a, lda, tb ? b + p0 * ldb : b + p0, ldb, c + p0, ldc, accumulate);
    else
      blas_gemm<T>(ta, tb, p1 - p0, n, k, ta ? a + p0 : a + p0 * lda, lda, b, ldb, c + p0 * ldc, ldc, accumulate);
  });
}

// f32/f64: operands go to BLAS as they are when a transpose flag can express them.
template <typename T>
void gemm_native(int64_t m, int64_t n, int64_t k, MatrixRef a, MatrixRef b, T* c, int64_t ldc, bool accumulate,
                 ThreadPool& pool) {
  std::vector<T> a_copy, b_copy;
  auto prepare = [&](MatrixRef& ref, int64_t rows, int64_t cols, std::vector<T>& copy) {
    BlasLayout layout = classify(ref, rows, cols);
    if (layout.ok) return layout;
    g_operand_copies.fetch_add(1, std::memory_order_relaxed);
    copy.resize(static_cast<size_t>(rows * cols));
    const T* src = static_cast<const T*>(ref.data);
    pool.parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t col = 0; col < cols; ++col)
          copy[static_cast<size_t>(r * cols + col)] = src[r * ref.row_stride + col * ref.col_stride];
    });
    ref = MatrixRef{copy.data(), cols, 1};
    return BlasLayout{true, false, std::max<int64_t>(cols, 1)};
  };
  BlasLayout la = prepare(a, m, k, a_copy);
  BlasLayout lb = prepare(b, k, n, b_copy);
  blas_gemm_parallel<T>(la.transposed, lb.transposed, m, n, k, static_cast<const T*>(a.data), la.ld,
                        static_cast<const T*>(b.data), lb.ld, c, ldc, accumulate, pool);
}

#if defined(__x86_64__)
// Eight halves at a time through the F16C instruction (every x86-64 CPU since 2012 has it; checked at run
// time, as kiln builds for the baseline ISA): Half's portable conversion branches on each element.
__attribute__((target("avx,f16c"))) void widen_halves_f16c(const Half* src, int64_t count, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < count; ++i) dst[i] = static_cast<float>(src[i]);
}

bool cpu_has_f16c() {
  static const bool yes = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return yes;
}
#endif

// dst[i] = src[i * stride] as f32; the unit stride (the common case) as its own loop, which vectorizes.
template <typename T>
void widen_run(const T* src, int64_t stride, int64_t count, float* dst) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, Half>) {
    if (stride == 1 && cpu_has_f16c()) {
      widen_halves_f16c(src, count, dst);
      return;
    }
  }
#endif
  if (stride == 1) {
    for (int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(src[i]);
  } else {
    for (int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(src[i * stride]);
  }
}

// f16/bf16 with at most kFewRows rows (a decoding step's): each worker converts a cache-sized block of B's
// columns to f32 and runs one sgemv per row over it, C rounded once. B is read once, at its own width
// (converting whole panels first wrote and read it again at twice its bytes).
template <typename T>
void gemm_reduced_few_rows(int64_t m, int64_t n, int64_t k, MatrixRef a, MatrixRef b, T* c, int64_t ldc,
                           bool accumulate, ThreadPool& pool) {
  for (int64_t v : {m, n, k}) check_blas_int(v, "size");
  use_single_threaded_blas();
  const T* pa = static_cast<const T*>(a.data);
  const T* pb = static_cast<const T*>(b.data);
  std::vector<float> rows(static_cast<size_t>(m * k));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t p = 0; p < k; ++p)
      rows[static_cast<size_t>(r * k + p)] = static_cast<float>(pa[r * a.row_stride + p * a.col_stride]);
  const int64_t block = std::max<int64_t>(16, kCachedBlockBytes / (int64_t(sizeof(float)) * k));
  const bool by_rows = b.col_stride < b.row_stride;  // B's columns are its inner dimension
  const int64_t pieces = split_pieces(m, n, k, sizeof(T), pool);
  pool.parallel_for(n, (n + pieces - 1) / pieces, [&](int64_t j_begin, int64_t j_end) {
    std::vector<float> panel(static_cast<size_t>(std::min(block, j_end - j_begin) * k)), out(panel.size() / k);
    for (int64_t j0 = j_begin; j0 < j_end; j0 += block) {
      const int64_t cols = std::min(block, j_end - j0);
      // The block in B's own order: k x cols (B stored k x n) or cols x k (a Linear weight, n x k), so the
      // conversion reads and writes in runs.
      if (by_rows) {
        for (int64_t p = 0; p < k; ++p)
          widen_run(pb + p * b.row_stride + j0 * b.col_stride, b.col_stride, cols, panel.data() + p * cols);
      } else {
        for (int64_t j = 0; j < cols; ++j)
          widen_run(pb + (j0 + j) * b.col_stride, b.row_stride, k, panel.data() + j * k);
      }
      for (int64_t r = 0; r < m; ++r) {
        T* row = c + r * ldc + j0;
        for (int64_t j = 0; j < cols; ++j) out[static_cast<size_t>(j)] = accumulate ? static_cast<float>(row[j]) : 0.0f;
        if (by_rows)  // panel is k x cols
          blas_gemv<float>(true, k, cols, panel.data(), cols, rows.data() + r * k, 1, out.data(), 1, 1.0f);
        else  // panel is cols x k
          blas_gemv<float>(false, cols, k, panel.data(), k, rows.data() + r * k, 1, out.data(), 1, 1.0f);
        for (int64_t j = 0; j < cols; ++j) row[j] = T(out[static_cast<size_t>(j)]);
      }
    }
  });
}

// f16/bf16: panels of A (rows) and B (columns) converted to f32, one sgemm per
// pair, C rounded once. Scratch stays within a few panels of kPanelElems.
template <typename T>
void gemm_reduced(int64_t m, int64_t n, int64_t k, MatrixRef a, MatrixRef b, T* c, int64_t ldc, bool accumulate,
                  ThreadPool& pool) {
  if (m <= kFewRows) {
    gemm_reduced_few_rows<T>(m, n, k, a, b, c, ldc, accumulate, pool);
    return;
  }
  constexpr int64_t kPanelElems = int64_t{1} << 21;
  const int64_t mb = std::clamp<int64_t>(kPanelElems / std::max<int64_t>(k, 1), 1, m);
  const int64_t nb = std::clamp<int64_t>(kPanelElems / std::max<int64_t>(k, 1), 1, n);
  std::vector<float> a_panel(static_cast<size_t>(mb * k)), b_panel(static_cast<size_t>(k * nb)),
      c_panel(static_cast<size_t>(mb * nb));
  const T* pa = static_cast<const T*>(a.data);
  const T* pb = static_cast<const T*>(b.data);
  const int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(k, 1));
  for (int64_t i0 = 0; i0 < m; i0 += mb) {
    const int64_t rows = std::min(mb, m - i0);
    pool.parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t p = 0; p < k; ++p)
          a_panel[static_cast<size_t>(r * k + p)] =
              static_cast<float>(pa[(i0 + r) * a.row_stride + p * a.col_stride]);
    });
    for (int64_t j0 = 0; j0 < n; j0 += nb) {
      const int64_t cols = std::min(nb, n - j0);
      pool.parallel_for(k, std::max<int64_t>(1, 8192 / cols), [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p)
          for (int64_t j = 0; j < cols; ++j)
            b_panel[static_cast<size_t>(p * cols + j)] =
                static_cast<float>(pb[p * b.row_stride + (j0 + j) * b.col_stride]);
      });
      if (accumulate)
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < cols; ++j)
            c_panel[static_cast<size_t>(r * cols + j)] = static_cast<float>(c[(i0 + r) * ldc + j0 + j]);
      blas_gemm_parallel<float>(false, false, rows, cols, k, a_panel.data(), std::max<int64_t>(k, 1), b_panel.data(),
                                std::max<int64_t>(cols, 1), c_panel.data(), std::max<int64_t>(cols, 1), accumulate,
                                pool);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < cols; ++j) c[(i0 + r) * ldc + j0 + j] = T(c_panel[static_cast<size_t>(r * cols + j)]);
    }
  }
}

// Integers: int64 accumulation; the final narrowing wraps like torch's own loop.
template <typename T>
void gemm_integer(int64_t m, int64_t n, int64_t k, MatrixRef a, MatrixRef b, T* c, int64_t ldc, bool accumulate,
                  ThreadPool& pool) {
  const T* pa = static_cast<const T*>(a.data);
  const T* pb = static_cast<const T*>(b.data);
  pool.parallel_for(m, std::max<int64_t>(1, 4096 / std::max<int64_t>(n * k, 1)), [&](int64_t r0, int64_t r1) {
    std::vector<uint64_t> acc(static_cast<size_t>(n));
    for (int64_t r = r0; r < r1; ++r) {
      std::fill(acc.begin(), acc.end(), 0);
      for (int64_t p = 0; p < k; ++p) {
        uint64_t x = static_cast<uint64_t>(static_cast<int64_t>(pa[r * a.row_stride + p * a.col_stride]));
        const T* brow = pb + p * b.row_stride;
        for (int64_t j = 0; j < n; ++j)
          acc[static_cast<size_t>(j)] += x * static_cast<uint64_t>(static_cast<int64_t>(brow[j * b.col_stride]));
      }
      for (int64_t j = 0; j < n; ++j) {
        uint64_t v = acc[static_cast<size_t>(j)];
        if (accumulate) v += static_cast<uint64_t>(static_cast<int64_t>(c[r * ldc + j]));
        c[r * ldc + j] = static_cast<T>(v);  // modular narrowing
      }
    }
  });
}

}  // namespace

void gemm(DType dtype, int64_t m, int64_t n, int64_t k, MatrixRef a, MatrixRef b, void* c, int64_t ldc,
          bool accumulate, ThreadPool& pool) {
  KILN_CHECK(m >= 0 && n >= 0 && k >= 0, "gemm: negative size ", m, "x", k, " @ ", k, "x", n);
  KILN_CHECK(dtype != DType::boolean, "gemm: bool is not supported");
  if (m == 0 || n == 0) return;
  dispatch_dtype(dtype, [&]<typename T>() {
    T* out = static_cast<T*>(c);
    if (k == 0) {
      if (!accumulate)
        for (int64_t r = 0; r < m; ++r) std::fill(out + r * ldc, out + r * ldc + n, from_compute<T>(0));
      return;
    }
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      gemm_native<T>(m, n, k, a, b, out, ldc, accumulate, pool);
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      gemm_reduced<T>(m, n, k, a, b, out, ldc, accumulate, pool);
    } else if constexpr (!std::is_same_v<T, bool>) {
      gemm_integer<T>(m, n, k, a, b, out, ldc, accumulate, pool);
    }
  });
}

int64_t gemm_operand_copies() { return g_operand_copies.load(std::memory_order_relaxed); }

}  // namespace kiln::cpu
