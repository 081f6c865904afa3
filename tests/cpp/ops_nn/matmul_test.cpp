// matmul against a naive double reference: odd sizes, 1-D operands, batch
// broadcasting, transposed (strided) operands read without copies, every
// claimed dtype, products large enough to split over the thread pool, and
// shape errors; matmul_epilogue's residual against the
// unfused adds, and its errors.
#include <gtest/gtest.h>

#include "backends/cpu/gemm.h"
#include "support/half.h"
#include "nn_test_util.h"

namespace kiln::nn_test {
namespace {

// torch.matmul in plain loops over the output index.
std::vector<double> reference_matmul(const HostTensor& a, const HostTensor& b, const Dims& out_dims) {
  const Dims& ad = a.type.dims;
  const Dims& bd = b.type.dims;
  const int64_t k = ad.back();
  const bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  std::vector<double> out;
  for (int64_t flat = 0; flat < numel(out_dims); ++flat) {
    Dims oi = unravel(flat, out_dims);
    // Re-insert the removed unit dims so oi is [batch..., i, j].
    if (a_vec) oi.insert(oi.end() - (b_vec ? 0 : 1), 0);
    if (b_vec) oi.push_back(0);
    const int64_t i = oi[oi.size() - 2], j = oi.back();
    Dims batch(oi.begin(), oi.end() - 2);
    double sum = 0;
    for (int64_t p = 0; p < k; ++p) {
      Dims ia, ib;
      if (a_vec) {
        ia = {p};
      } else {
        ia = broadcast_index(batch, Dims(ad.begin(), ad.end() - 2));
        ia.push_back(i);
        ia.push_back(p);
      }
      if (b_vec) {
        ib = {p};
      } else {
        ib = broadcast_index(batch, Dims(bd.begin(), bd.end() - 2));
        ib.push_back(p);
        ib.push_back(j);
      }
      sum += a.at(ia) * b.at(ib);
    }
    out.push_back(sum);
  }
  return out;
}

void check_matmul(TensorType ta, TensorType tb, const Dims& expect_dims, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  HostTensor a(ta), b(tb);
  const double lo = is_floating(ta.dtype) ? -1.0 : ta.dtype == DType::u8 ? 0.0 : -4.0;
  const double hi = is_floating(ta.dtype) ? 1.0 : 4.0;
  fill_random(a, rng, lo, hi);
  fill_random(b, rng, lo, hi);
  auto out = run_op("matmul", {&a, &b});
  ASSERT_EQ(out[0].type.dims, expect_dims);
  expect_close(out[0], reference_matmul(a, b, expect_dims), "matmul " + to_string(ta) + " @ " + to_string(tb));
}

TEST(Matmul, OddSizes2dEveryFloatDtype) {
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16})
    check_matmul(TensorType(d, {5, 7}), TensorType(d, {7, 3}), {5, 3});
}

TEST(Matmul, IntegersExact) {
  for (DType d : {DType::i64, DType::i32, DType::i16, DType::i8, DType::u8})
    check_matmul(TensorType(d, {5, 7}), TensorType(d, {7, 3}), {5, 3});
}

TEST(Matmul, OneDimensionalOperands) {
  check_matmul(TensorType(DType::f32, {7}), TensorType(DType::f32, {7}), {});
  check_matmul(TensorType(DType::f32, {5, 7}), TensorType(DType::f32, {7}), {5});
  check_matmul(TensorType(DType::f32, {7}), TensorType(DType::f32, {7, 3}), {3});
  check_matmul(TensorType(DType::f64, {7}), TensorType(DType::f64, {2, 7, 3}), {2, 3});
  check_matmul(TensorType(DType::f32, {2, 5, 7}), TensorType(DType::f32, {7}), {2, 5});
}

TEST(Matmul, BatchBroadcasting) {
  check_matmul(TensorType(DType::f32, {2, 1, 5, 7}), TensorType(DType::f32, {3, 7, 4}), {2, 3, 5, 4});
  check_matmul(TensorType(DType::bf16, {2, 1, 5, 7}), TensorType(DType::bf16, {3, 7, 4}), {2, 3, 5, 4});
  check_matmul(TensorType(DType::i32, {3, 5, 7}), TensorType(DType::i32, {7, 4}), {3, 5, 4});
  // An expanded (stride 0) batch dim on a.
  check_matmul(TensorType(DType::f32, {3, 5, 7}, {0, 7, 1}), TensorType(DType::f32, {3, 7, 2}), {3, 5, 2});
}

TEST(Matmul, TransposedWeightIsReadInPlace) {
  // linear(x, W) = matmul(x, permute(W, [1, 0])) with W [N=3, K=7]: the view has strides [1, 7].
  int64_t before = cpu::gemm_operand_copies();
  check_matmul(TensorType(DType::f32, {5, 7}), TensorType(DType::f32, {7, 3}, {1, 7}), {5, 3});
  // 3-D activations fold into one GEMM with the shared transposed weight.
  check_matmul(TensorType(DType::f32, {2, 5, 7}), TensorType(DType::f32, {7, 3}, {1, 7}), {2, 5, 3});
  check_matmul(TensorType(DType::f64, {2, 5, 7}), TensorType(DType::f64, {7, 3}, {1, 7}), {2, 5, 3});
  // Transposed a, and both transposed in a batched product.
  check_matmul(TensorType(DType::f32, {5, 7}, {1, 5}), TensorType(DType::f32, {7, 3}), {5, 3});
  check_matmul(TensorType(DType::f32, {2, 5, 7}, {35, 1, 5}), TensorType(DType::f32, {2, 7, 3}, {21, 1, 7}),
               {2, 5, 3});
  // A weight view with padded rows (leading dimension larger than the row).
  check_matmul(TensorType(DType::f32, {5, 7}), TensorType(DType::f32, {7, 3}, {1, 9}), {5, 3});
  EXPECT_EQ(cpu::gemm_operand_copies(), before) << "a transposed operand was copied";
}

TEST(Matmul, OperandWithoutUnitStrideIsCopiedAndCorrect) {
  int64_t before = cpu::gemm_operand_copies();
  // Every other column: strides [14, 2].
  check_matmul(TensorType(DType::f32, {5, 7}, {14, 2}), TensorType(DType::f32, {7, 3}), {5, 3});
  EXPECT_EQ(cpu::gemm_operand_copies(), before + 1);
}

TEST(Matmul, ReducedPrecisionStridedAndBatched) {
  for (DType d : {DType::f16, DType::bf16}) {
    check_matmul(TensorType(d, {2, 5, 7}), TensorType(d, {7, 3}, {1, 7}), {2, 5, 3});
    check_matmul(TensorType(d, {5, 7}, {14, 2}), TensorType(d, {2, 7, 3}), {2, 5, 3});
  }
}

TEST(Matmul, LargerThanOnePanel) {
  // K = 300 and enough rows and columns to make several BLAS-sized blocks.
  check_matmul(TensorType(DType::f32, {33, 300}), TensorType(DType::f32, {300, 65}, {1, 300}), {33, 65}, 7);
  check_matmul(TensorType(DType::bf16, {33, 300}), TensorType(DType::bf16, {300, 65}), {33, 65}, 8);
}

// gemm() on raw f32 arrays against a double loop, with a and b read plain or transposed and C accumulated
// into (or overwritten); C's rows `ldc` apart (n when 0), the elements between them left as they were.
void check_gemm(int64_t m, int64_t n, int64_t k, bool a_transposed, bool b_transposed, uint32_t seed,
                int64_t ldc = 0, bool accumulate = true) {
  if (ldc == 0) ldc = n;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), c(static_cast<size_t>(m * ldc));
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  for (float& v : c) v = dist(rng);
  const std::vector<float> c0 = c;
  const cpu::MatrixRef ar = a_transposed ? cpu::MatrixRef{a.data(), 1, m} : cpu::MatrixRef{a.data(), k, 1};
  const cpu::MatrixRef br = b_transposed ? cpu::MatrixRef{b.data(), 1, k} : cpu::MatrixRef{b.data(), n, 1};
  cpu::gemm(DType::f32, m, n, k, ar, br, c.data(), ldc, accumulate, ThreadPool::global());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      double want = accumulate || j >= n ? c0[static_cast<size_t>(i * ldc + j)] : 0.0;
      for (int64_t p = 0; j < n && p < k; ++p)
        want += static_cast<double>(a[static_cast<size_t>(i * ar.row_stride + p * ar.col_stride)]) *
                b[static_cast<size_t>(p * br.row_stride + j * br.col_stride)];
      ASSERT_NEAR(c[static_cast<size_t>(i * ldc + j)], want, 1e-4)
          << m << "x" << k << " @ " << k << "x" << n << (a_transposed ? " a^T" : "") << (b_transposed ? " b^T" : "")
          << " ldc " << ldc << (accumulate ? "" : " overwritten") << " at (" << i << ", " << j << ")";
    }
}

TEST(Gemm, ProductsSplitOverThePoolMatchTheReference) {
  // Over 4 MFLOP or 800 KB of operands a piece: BLAS runs in column pieces (n >= m) or row pieces (m > n) on
  // the pool; the pieces' offsets follow the transpose flags, and each accumulates into its own slice of C.
  // The one-row products (a decoding step's) split by their operands' bytes, not their flops. One row or
  // one column of C goes through BLAS's matrix-vector product, split too (1 x 1100, 700 x 1), a column of C
  // strided (a piece of a wider C).
  for (bool at : {false, true})
    for (bool bt : {false, true}) {
      check_gemm(70, 261, 300, at, bt, 11);
      check_gemm(261, 70, 300, at, bt, 12);
      check_gemm(1, 1100, 400, at, bt, 13);
      check_gemm(2, 900, 500, at, bt, 14);
      check_gemm(4, 300, 2000, at, bt, 19);
      check_gemm(3, 300, 2000, at, bt, 20, /*ldc=*/301, /*accumulate=*/false);
      check_gemm(700, 1, 300, at, bt, 15);
      check_gemm(1, 1, 50, at, bt, 16);
      check_gemm(700, 1, 300, at, bt, 17, /*ldc=*/3);
    }
}

// gemm() in f16 or bf16 with few rows (a decoding step's: B converted a cache-sized block at a time, one
// sgemv per row) against a double loop over the 16-bit values: B read plain (k x n) or as a Linear weight
// (n x k), C accumulated into or overwritten, its rows `ldc` apart with the elements between them left
// alone, and products large enough to be split over the pool.
template <typename T>
void check_gemm_16bit_few_rows(int64_t m, int64_t n, int64_t k, bool b_transposed, bool accumulate, int64_t ldc) {
  const DType dtype = std::is_same_v<T, Half> ? DType::f16 : DType::bf16;
  const double rounding = std::is_same_v<T, Half> ? 1.0 / 1024.0 : 1.0 / 128.0;  // the sum rounded once
  std::mt19937 rng(static_cast<uint32_t>(m * 7 + n + k));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<T> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), c(static_cast<size_t>(m * ldc));
  for (auto* v : {&a, &b, &c})
    for (T& x : *v) x = T(dist(rng));
  const std::vector<T> c0 = c;
  const cpu::MatrixRef br = b_transposed ? cpu::MatrixRef{b.data(), 1, k} : cpu::MatrixRef{b.data(), n, 1};
  cpu::gemm(dtype, m, n, k, cpu::MatrixRef{a.data(), k, 1}, br, c.data(), ldc, accumulate, ThreadPool::global());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const float before = static_cast<float>(c0[static_cast<size_t>(i * ldc + j)]);
      const float got = static_cast<float>(c[static_cast<size_t>(i * ldc + j)]);
      if (j >= n) {
        ASSERT_EQ(got, before) << "between rows at (" << i << ", " << j << ")";
        continue;
      }
      double want = accumulate ? before : 0.0;
      for (int64_t p = 0; p < k; ++p)
        want += static_cast<double>(static_cast<float>(a[static_cast<size_t>(i * k + p)])) *
                static_cast<float>(b[static_cast<size_t>(p * br.row_stride + j * br.col_stride)]);
      ASSERT_NEAR(got, want, 1e-3 + std::abs(want) * rounding)
          << dtype_name(dtype) << " " << m << "x" << k << " @ " << k << "x" << n << (b_transposed ? " b^T" : "") << " at (" << i << ", " << j << ")";
    }
}

TEST(Gemm, ReducedPrecisionFewRowsMatchTheReference) {
  for (bool bt : {false, true})
    for (bool accumulate : {false, true}) {
      check_gemm_16bit_few_rows<BFloat16>(1, 70, 300, bt, accumulate, 70);
      check_gemm_16bit_few_rows<BFloat16>(3, 37, 50, bt, accumulate, 40);
      check_gemm_16bit_few_rows<BFloat16>(4, 500, 2000, bt, accumulate, 500);  // 2 MB of B: split over the pool
      check_gemm_16bit_few_rows<Half>(1, 70, 300, bt, accumulate, 70);  // 8 halves at a time, and the rest
      check_gemm_16bit_few_rows<Half>(4, 500, 2000, bt, accumulate, 503);
    }
}

TEST(Matmul, EmptyContractionGivesZeros) {
  HostTensor a(TensorType(DType::f32, {2, 0})), b(TensorType(DType::f32, {0, 3}));
  auto out = run_op("matmul", {&a, &b});
  expect_close(out[0], std::vector<double>(6, 0.0), "k = 0");
}

TEST(Matmul, ShapeErrors) {
  expect_contains(build_error("matmul", {TensorType(DType::f32, {5, 7}), TensorType(DType::f32, {6, 3})}),
                  "cannot be multiplied (7 != 6");
  expect_contains(build_error("matmul", {TensorType(DType::f32, {5, 7}), TensorType(DType::f32, {6, 3})}),
                  "(matmul)");
  expect_contains(build_error("matmul", {TensorType(DType::f32, {}), TensorType(DType::f32, {3})}),
                  "at least 1 dim");
  expect_contains(build_error("matmul", {TensorType(DType::f32, {2, 3}), TensorType(DType::f16, {3, 2})}),
                  "dtypes differ");
  expect_contains(build_error("matmul", {TensorType(DType::boolean, {2, 3}), TensorType(DType::boolean, {3, 2})}),
                  "bool");
  expect_contains(build_error("matmul", {TensorType(DType::f32, {2, 5, 7}), TensorType(DType::f32, {3, 7, 2})}),
                  "cannot broadcast");
}

// The residual (read through strides, or by row when laid out as the output)
// rounds like the two unfused adds: the fused op's bytes equal matmul, then
// + bias, then + residual.
TEST(MatmulEpilogue, ResidualMatchesTheUnfusedAdds) {
  for (DType d : {DType::f32, DType::f16, DType::bf16})
    for (bool strided : {true, false}) {
      std::mt19937 rng(3);
      HostTensor a(TensorType(d, {2, 5, 7})), b(TensorType(d, {7, 3}, {1, 7})), bias(TensorType(d, {3}));
      HostTensor residual(strided ? TensorType(d, {2, 5, 3}, {3, 6, 1})  // stored [5, 2, 3]
                                  : TensorType(d, {2, 5, 3}));
      for (HostTensor* t : {&a, &b, &bias, &residual}) fill_random(*t, rng, -4.0, 4.0);
      Attrs none;
      none.set("activation", std::string("none"));
      auto fused = run_op("matmul_epilogue", {&a, &b, &bias, &residual}, none);
      auto product = run_op("matmul", {&a, &b});
      auto biased = run_op("add", {&product[0], &bias});
      auto want = run_op("add", {&biased[0], &residual});
      EXPECT_EQ(fused[0].bytes, want[0].bytes) << dtype_name(d) << (strided ? " strided residual" : "");
    }
}

// Bias and activation give the bytes of matmul, + bias, then the activation op (one elementwise evaluator).
TEST(MatmulEpilogue, BiasAndActivationMatchTheUnfusedOps) {
  for (DType d : {DType::f32, DType::f16, DType::bf16})
    for (const char* act : {"relu", "gelu", "gelu_tanh"}) {
      std::mt19937 rng(4);
      HostTensor a(TensorType(d, {3, 4, 9})), b(TensorType(d, {9, 37}, {1, 9})), bias(TensorType(d, {37}));
      for (HostTensor* t : {&a, &b, &bias}) fill_random(*t, rng, -3.0, 3.0);
      Attrs attrs;
      attrs.set("activation", std::string(act));
      auto fused = run_op("matmul_epilogue", {&a, &b, &bias}, attrs);
      auto product = run_op("matmul", {&a, &b});
      auto biased = run_op("add", {&product[0], &bias});
      auto want = run_op(act, {&biased[0]});
      EXPECT_EQ(fused[0].bytes, want[0].bytes) << dtype_name(d) << " " << act;
    }
}

TEST(MatmulEpilogue, ResidualErrors) {
  const TensorType a(DType::f32, {4, 8}), b(DType::f32, {8, 16}), bias(DType::f32, {16});
  Attrs none, relu;
  none.set("activation", std::string("none"));
  relu.set("activation", std::string("relu"));
  const std::string broadcast = build_error("matmul_epilogue", {a, b, bias, TensorType(DType::f32, {1, 16})}, none);
  expect_contains(broadcast, "(matmul_epilogue): residual must be [4,16] (the output's dims), got [1,16]");
  expect_contains(build_error("matmul_epilogue", {a, b, bias, TensorType(DType::f32, {2, 4, 16})}, none),
                  "residual must be [4,16]");
  expect_contains(build_error("matmul_epilogue", {a, b, bias, TensorType(DType::f16, {4, 16})}, none),
                  "residual is f16 but the product is f32");
  expect_contains(build_error("matmul_epilogue", {a, b, bias, TensorType(DType::f32, {4, 16})}, relu),
                  "a residual needs activation none, got 'relu'");
  expect_contains(build_error("matmul_epilogue", {a, b, bias, TensorType(DType::f32, {4, 16}), bias}, none),
                  "expects 2 to 4 inputs, got 5");
  EXPECT_EQ(build_error("matmul_epilogue", {a, b, bias, TensorType(DType::f32, {4, 16}, {1, 4})}, none), "");
}

TEST(Matmul, DeclaresAtenOverloads) {
  EXPECT_EQ(find_op_for_aten("aten.mm.default"), &get_op("matmul"));
  EXPECT_EQ(find_op_for_aten("aten.bmm.default"), &get_op("matmul"));
  EXPECT_EQ(find_op_for_aten("aten.convolution.default"), &get_op("conv2d"));
}

}  // namespace
}  // namespace kiln::nn_test
