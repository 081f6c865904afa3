// Pooling against naive double references: max (values and indices, NaN,
// dilation), average (padding, ceil_mode, count_include_pad,
// divisor_override), adaptive average (shrinking and growing), strided
// inputs, dtypes, and shape errors.
#include <gtest/gtest.h>

#include <limits>

#include "nn_test_util.h"

namespace kiln::nn_test {
namespace {

struct PoolCase {
  Dims kernel, stride, padding{0, 0}, dilation{1, 1};
  bool ceil_mode = false;
};

Attrs pool_attrs(const PoolCase& c) {
  Attrs a;
  a.set("kernel_size", c.kernel);
  a.set("stride", c.stride);
  a.set("padding", c.padding);
  a.set("ceil_mode", c.ceil_mode);
  return a;
}

// Plane index n, c of an NCHW or CHW tensor.
double at4(const HostTensor& x, int64_t n, int64_t c, int64_t h, int64_t w) {
  return x.type.rank() == 4 ? x.at({n, c, h, w}) : x.at({c, h, w});
}

Dims nchw(const Dims& out_dims, int64_t flat) {
  Dims oi = unravel(flat, out_dims);
  if (oi.size() == 3) oi.insert(oi.begin(), 0);
  return oi;
}

void check_max_pool(TensorType type, const PoolCase& c, const Dims& expect_dims) {
  std::mt19937 rng(3);
  HostTensor x(type);
  fill_random(x, rng, -20, 20);
  Attrs attrs = pool_attrs(c);
  attrs.set("dilation", c.dilation);
  auto out = run_op("max_pool2d", {&x}, attrs);
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[0].type.dims, expect_dims);
  ASSERT_EQ(out[1].type.dtype, DType::i64);
  const int64_t in_h = type.dims[type.rank() - 2], in_w = type.dims.back();
  std::vector<double> values, indices;
  for (int64_t flat = 0; flat < numel(expect_dims); ++flat) {
    Dims oi = nchw(expect_dims, flat);
    double best = -std::numeric_limits<double>::infinity();
    int64_t best_index = -1;
    for (int64_t i = 0; i < c.kernel[0]; ++i)
      for (int64_t j = 0; j < c.kernel[1]; ++j) {
        int64_t h = oi[2] * c.stride[0] - c.padding[0] + i * c.dilation[0];
        int64_t w = oi[3] * c.stride[1] - c.padding[1] + j * c.dilation[1];
        if (h < 0 || h >= in_h || w < 0 || w >= in_w) continue;
        double v = at4(x, oi[0], oi[1], h, w);
        if (v > best) {
          best = v;
          best_index = h * in_w + w;
        }
      }
    values.push_back(best);
    indices.push_back(static_cast<double>(best_index));
  }
  expect_close(out[0], values, "max_pool2d values " + to_string(type));
  expect_close(out[1], indices, "max_pool2d indices " + to_string(type));
}

TEST(MaxPool2d, PaddedStridedAndCeilMode) {
  PoolCase floor_case{{3, 3}, {2, 2}, {1, 1}, {1, 1}, false};
  check_max_pool(TensorType(DType::f32, {2, 3, 8, 7}), floor_case, {2, 3, 4, 4});
  PoolCase ceil_case{{3, 3}, {2, 2}, {0, 0}, {1, 1}, true};
  check_max_pool(TensorType(DType::f32, {2, 3, 8, 7}), ceil_case, {2, 3, 4, 3});
  PoolCase ceil_padded{{2, 2}, {2, 2}, {1, 1}, {1, 1}, true};
  // W: ceil gives 5 columns, but the 5th window would start in the right padding.
  check_max_pool(TensorType(DType::f32, {1, 2, 8, 7}), ceil_padded, {1, 2, 5, 4});
}

TEST(MaxPool2d, DilationDtypesAndStridedInput) {
  PoolCase dil{{2, 3}, {1, 2}, {1, 1}, {2, 2}, false};
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64})
    check_max_pool(TensorType(d, {1, 2, 9, 8}), dil, {1, 2, 9, 3});
  // Unbatched, with H and W transposed in memory.
  PoolCase plain{{2, 2}, {2, 2}};
  check_max_pool(TensorType(DType::f32, {3, 6, 5}, {30, 1, 6}), plain, {3, 3, 2});
}

TEST(MaxPool2d, NanPropagates) {
  HostTensor x(TensorType(DType::f32, {1, 1, 2, 2}));
  x.set({0, 0, 0, 0}, 1.0);
  x.set({0, 0, 0, 1}, std::nan(""));
  x.set({0, 0, 1, 0}, 5.0);
  x.set({0, 0, 1, 1}, 2.0);
  Attrs a;
  a.set("kernel_size", Dims{2, 2});
  auto out = run_op("max_pool2d", {&x}, a);
  EXPECT_TRUE(std::isnan(out[0].at({0, 0, 0, 0})));
  EXPECT_EQ(out[1].at({0, 0, 0, 0}), 1.0);
}

// Ties, -inf and several NaNs in a plane wide enough for interior windows (read tap by tap across a row) and
// border ones: each output is the first largest value of its window, or its first NaN, and that one's index.
TEST(MaxPool2d, TiesInfinitiesAndNansMatchTheFirstWinner) {
  const Dims dims{1, 2, 7, 11};
  HostTensor x(TensorType(DType::f32, dims));
  std::mt19937 rng(11);
  const double levels[] = {-1.0, 0.0, 1.0, -std::numeric_limits<double>::infinity()};
  for (int64_t flat = 0; flat < numel(dims); ++flat) {
    const uint32_t r = rng() % 40;
    x.set(unravel(flat, dims), r == 0 ? std::nan("") : levels[r % 4]);
  }
  for (bool all_minus_inf : {false, true}) {
    if (all_minus_inf)
      for (int64_t flat = 0; flat < numel(dims); ++flat) x.set(unravel(flat, dims), -std::numeric_limits<double>::infinity());
    Attrs a;
    a.set("kernel_size", Dims{3, 3});
    a.set("stride", Dims{2, 1});
    a.set("padding", Dims{1, 1});
    auto out = run_op("max_pool2d", {&x}, a);
    const Dims out_dims = out[0].type.dims;
    ASSERT_EQ(out_dims, (Dims{1, 2, 4, 11}));
    for (int64_t flat = 0; flat < numel(out_dims); ++flat) {
      const Dims oi = unravel(flat, out_dims);
      double best = 0;
      int64_t best_index = -1;
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 3; ++j) {
          const int64_t h = oi[2] * 2 - 1 + i, w = oi[3] - 1 + j;
          if (h < 0 || h >= dims[2] || w < 0 || w >= dims[3]) continue;
          const double v = x.at({0, oi[1], h, w});
          if (best_index < 0 || v > best || (std::isnan(v) && !std::isnan(best))) {
            best = v;
            best_index = h * dims[3] + w;
          }
        }
      const double got = out[0].at(oi);
      EXPECT_TRUE(std::isnan(best) ? std::isnan(got) : got == best) << "output " << flat;
      EXPECT_EQ(out[1].at(oi), static_cast<double>(best_index)) << "output " << flat;
    }
  }
}

struct AvgCase {
  PoolCase pool;
  bool count_include_pad = true;
  int64_t divisor_override = 0;
};

void check_avg_pool(TensorType type, const AvgCase& c, const Dims& expect_dims) {
  std::mt19937 rng(5);
  HostTensor x(type);
  fill_random(x, rng);
  Attrs attrs = pool_attrs(c.pool);
  attrs.set("count_include_pad", c.count_include_pad);
  attrs.set("divisor_override", c.divisor_override);
  auto out = run_op("avg_pool2d", {&x}, attrs);
  ASSERT_EQ(out[0].type.dims, expect_dims);
  const int64_t in_h = type.dims[type.rank() - 2], in_w = type.dims.back();
  const PoolCase& p = c.pool;
  std::vector<double> want;
  for (int64_t flat = 0; flat < numel(expect_dims); ++flat) {
    Dims oi = nchw(expect_dims, flat);
    double sum = 0;
    int64_t inside = 0, in_padded = 0;
    for (int64_t i = 0; i < p.kernel[0]; ++i)
      for (int64_t j = 0; j < p.kernel[1]; ++j) {
        int64_t h = oi[2] * p.stride[0] - p.padding[0] + i, w = oi[3] * p.stride[1] - p.padding[1] + j;
        // torch counts window cells inside the padded input (not past it, as ceil_mode windows may go).
        if (h < in_h + p.padding[0] && w < in_w + p.padding[1]) ++in_padded;
        if (h < 0 || h >= in_h || w < 0 || w >= in_w) continue;
        sum += at4(x, oi[0], oi[1], h, w);
        ++inside;
      }
    double divisor = c.divisor_override ? c.divisor_override : c.count_include_pad ? in_padded : inside;
    want.push_back(sum / divisor);
  }
  expect_close(out[0], want, "avg_pool2d " + to_string(type));
}

TEST(AvgPool2d, PaddingCeilModeAndDivisors) {
  for (bool include : {true, false}) {
    check_avg_pool(TensorType(DType::f32, {2, 3, 7, 8}), {{{3, 3}, {2, 2}, {1, 1}}, include}, {2, 3, 4, 4});
    check_avg_pool(TensorType(DType::f32, {2, 3, 7, 8}), {{{3, 2}, {2, 3}, {1, 1}, {1, 1}, true}, include},
                   {2, 3, 4, 3});
  }
  check_avg_pool(TensorType(DType::f32, {1, 2, 5, 5}), {{{2, 2}, {2, 2}, {0, 0}, {1, 1}, true}, true, 3},
                 {1, 2, 3, 3});
}

TEST(AvgPool2d, DtypesAndStridedInput) {
  for (DType d : {DType::f64, DType::f16, DType::bf16})
    check_avg_pool(TensorType(d, {1, 2, 6, 5}), {{{2, 2}, {1, 1}, {1, 1}}, false}, {1, 2, 7, 6});
  check_avg_pool(TensorType(DType::f32, {2, 6, 5}, {1, 10, 2}), {{{3, 3}, {3, 3}}}, {2, 2, 1});
}

void check_adaptive(TensorType type, const Dims& size) {
  std::mt19937 rng(9);
  HostTensor x(type);
  fill_random(x, rng);
  Attrs a;
  a.set("output_size", size);
  auto out = run_op("adaptive_avg_pool2d", {&x}, a);
  const int64_t in_h = type.dims[type.rank() - 2], in_w = type.dims.back();
  std::vector<double> want;
  for (int64_t flat = 0; flat < out[0].type.numel(); ++flat) {
    Dims oi = nchw(out[0].type.dims, flat);
    // start = floor(o * I / O), end = ceil((o + 1) * I / O), in floating point.
    auto start = [](int64_t o, int64_t in, int64_t outs) { return (int64_t)std::floor(double(o * in) / outs); };
    auto end = [](int64_t o, int64_t in, int64_t outs) { return (int64_t)std::ceil(double((o + 1) * in) / outs); };
    double sum = 0;
    int64_t count = 0;
    for (int64_t h = start(oi[2], in_h, size[0]); h < end(oi[2], in_h, size[0]); ++h)
      for (int64_t w = start(oi[3], in_w, size[1]); w < end(oi[3], in_w, size[1]); ++w, ++count)
        sum += at4(x, oi[0], oi[1], h, w);
    want.push_back(sum / count);
  }
  Dims expect(type.dims.begin(), type.dims.end() - 2);
  expect.insert(expect.end(), size.begin(), size.end());
  ASSERT_EQ(out[0].type.dims, expect);
  expect_close(out[0], want, "adaptive_avg_pool2d " + to_string(type));
}

TEST(AdaptiveAvgPool2d, ShrinkGrowAndDtypes) {
  check_adaptive(TensorType(DType::f32, {2, 3, 7, 5}), {3, 2});
  check_adaptive(TensorType(DType::f32, {2, 3, 2, 3}), {4, 5});
  check_adaptive(TensorType(DType::f32, {3, 7, 5}, {1, 15, 3}), {1, 1});
  for (DType d : {DType::f64, DType::f16, DType::bf16}) check_adaptive(TensorType(d, {1, 2, 9, 6}), {4, 4});
}

TEST(Pool2d, ShapeErrors) {
  Attrs big;
  big.set("kernel_size", Dims{5, 5});
  expect_contains(build_error("max_pool2d", {TensorType(DType::f32, {1, 2, 3, 3})}, big),
                  "kernel_size [5,5] is larger than the (padded) input [1,2,3,3]");
  expect_contains(build_error("avg_pool2d", {TensorType(DType::f32, {1, 2, 3, 3})}, big), "larger than");
  Attrs pad;
  pad.set("kernel_size", Dims{2, 2});
  pad.set("padding", Dims{2, 2});
  expect_contains(build_error("max_pool2d", {TensorType(DType::f32, {1, 2, 8, 8})}, pad),
                  "should be at most half of kernel_size");
  expect_contains(build_error("max_pool2d", {TensorType(DType::f32, {8, 8})}, big), "[N, C, H, W] or [C, H, W]");
  expect_contains(build_error("max_pool2d", {TensorType(DType::f32, {1, 2, 8, 8})}), "'kernel_size' is missing");
  expect_contains(build_error("avg_pool2d", {TensorType(DType::i32, {1, 2, 8, 8})}, pad), "floating-point");
  Attrs zero;
  zero.set("output_size", Dims{2, 2});
  expect_contains(build_error("adaptive_avg_pool2d", {TensorType(DType::f32, {1, 2, 0, 8})}, zero), "non-zero");
}

}  // namespace
}  // namespace kiln::nn_test
