// conv2d against a naive double reference: kernel sizes, stride, padding,
// dilation, groups, depthwise, 1x1, unbatched, strided input and weight
// layouts, every floating dtype, and shape errors.
#include <gtest/gtest.h>

#include "nn_test_util.h"

namespace kiln::nn_test {
namespace {

struct ConvCase {
  Dims x, w;
  Dims stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
  bool bias = false;
};

std::vector<double> reference_conv(const HostTensor& x, const HostTensor& w, const HostTensor* bias,
                                   const ConvCase& c, const Dims& out_dims) {
  const bool batched = x.type.rank() == 4;
  const int64_t in_h = x.type.dims[batched ? 2 : 1], in_w = x.type.dims[batched ? 3 : 2];
  const int64_t og = w.type.dims[0] / c.groups, cg = w.type.dims[1];
  std::vector<double> out;
  for (int64_t flat = 0; flat < numel(out_dims); ++flat) {
    Dims oi = unravel(flat, out_dims);
    if (!batched) oi.insert(oi.begin(), 0);
    const int64_t n = oi[0], o = oi[1], oh = oi[2], ow = oi[3];
    double sum = bias ? bias->at({o}) : 0.0;
    const int64_t group = o / og;
    for (int64_t ci = 0; ci < cg; ++ci)
      for (int64_t i = 0; i < w.type.dims[2]; ++i)
        for (int64_t j = 0; j < w.type.dims[3]; ++j) {
          int64_t h = oh * c.stride[0] - c.padding[0] + i * c.dilation[0];
          int64_t ww = ow * c.stride[1] - c.padding[1] + j * c.dilation[1];
          if (h < 0 || h >= in_h || ww < 0 || ww >= in_w) continue;
          int64_t ch = group * cg + ci;
          double xv = batched ? x.at({n, ch, h, ww}) : x.at({ch, h, ww});
          sum += xv * w.at({o, ci, i, j});
        }
    out.push_back(sum);
  }
  return out;
}

Attrs conv_attrs(const ConvCase& c) {
  Attrs a;
  a.set("stride", c.stride);
  a.set("padding", c.padding);
  a.set("dilation", c.dilation);
  a.set("groups", c.groups);
  return a;
}

void check_conv(const ConvCase& c, DType d, const Dims& expect_dims, Dims x_strides = {}, Dims w_strides = {}) {
  std::mt19937 rng(static_cast<uint32_t>(c.x.size() * 31 + c.w[2] * 7 + c.groups));
  HostTensor x(x_strides.empty() ? TensorType(d, c.x) : TensorType(d, c.x, x_strides));
  HostTensor w(w_strides.empty() ? TensorType(d, c.w) : TensorType(d, c.w, w_strides));
  HostTensor b(TensorType(d, {c.w[0]}));
  fill_random(x, rng);
  fill_random(w, rng);
  fill_random(b, rng);
  std::vector<HostTensor*> inputs = {&x, &w};
  if (c.bias) inputs.push_back(&b);
  auto out = run_op("conv2d", inputs, conv_attrs(c));
  ASSERT_EQ(out[0].type.dims, expect_dims);
  expect_close(out[0], reference_conv(x, w, c.bias ? &b : nullptr, c, expect_dims),
               "conv2d x" + to_string(x.type) + " w" + to_string(w.type));
}

TEST(Conv2d, ThreeByThreePaddedWithBias) {
  ConvCase c{{2, 3, 7, 6}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true};
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16}) check_conv(c, d, {2, 4, 7, 6});
}

TEST(Conv2d, FiveByFiveStrideTwo) {
  ConvCase c{{1, 2, 11, 9}, {3, 2, 5, 5}, {2, 2}, {1, 1}, {1, 1}, 1, false};
  check_conv(c, DType::f32, {1, 3, 5, 4});
}

TEST(Conv2d, DilationAndAsymmetricAttrs) {
  ConvCase c{{2, 2, 9, 10}, {3, 2, 3, 2}, {1, 2}, {2, 0}, {2, 3}, 1, true};
  check_conv(c, DType::f32, {2, 3, 9, 4});
}

TEST(Conv2d, GroupsTwo) {
  ConvCase c{{2, 4, 6, 5}, {6, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, true};
  for (DType d : {DType::f32, DType::bf16}) check_conv(c, d, {2, 6, 6, 5});
}

TEST(Conv2d, DepthwiseWithMultiplier) {
  ConvCase c{{2, 3, 8, 7}, {6, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 3, true};
  for (DType d : {DType::f32, DType::f64, DType::f16}) check_conv(c, d, {2, 6, 4, 4});
  ConvCase plain{{1, 5, 6, 6}, {5, 1, 5, 5}, {1, 1}, {2, 2}, {1, 1}, 5, false};
  check_conv(plain, DType::f32, {1, 5, 6, 6});
}

TEST(Conv2d, PointwiseAndChannelsLastInput) {
  ConvCase c{{2, 5, 4, 3}, {7, 5, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true};
  check_conv(c, DType::f32, {2, 7, 4, 3});
  // The same input stored channels-last (NHWC memory, NCHW view).
  check_conv(c, DType::f32, {2, 7, 4, 3}, {60, 1, 15, 5});
  ConvCase k3{{2, 5, 4, 3}, {7, 5, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false};
  check_conv(k3, DType::f32, {2, 7, 4, 3}, {60, 1, 15, 5});
}

TEST(Conv2d, NonContiguousWeight) {
  // OHWI memory viewed as OIHW: strides [kh*kw*C, 1, kw*C, C].
  ConvCase c{{1, 3, 6, 6}, {4, 3, 3, 2}, {1, 1}, {0, 1}, {1, 1}, 1, true};
  check_conv(c, DType::f32, {1, 4, 4, 7}, {}, {18, 1, 6, 3});
}

TEST(Conv2d, Unbatched) {
  ConvCase c{{3, 7, 6}, {4, 3, 3, 3}, {2, 1}, {1, 1}, {1, 1}, 1, true};
  check_conv(c, DType::f32, {4, 4, 6});
}

TEST(Conv2d, LargePlaneUsesSeveralColumnChunks) {
  // kdim = 16 * 9 = 144 and a 96x96 plane: more than one im2col chunk.
  ConvCase c{{1, 16, 96, 96}, {2, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true};
  check_conv(c, DType::f32, {1, 2, 96, 96});
}

// conv2d_fused (a ResNet block's end): the bytes of conv2d with its bias, + the residual, then ReLU, with
// the residual laid out as the output (read in runs) and strided (read through its strides).
TEST(Conv2dFused, ResidualAndReluMatchTheUnfusedOps) {
  for (DType d : {DType::f32, DType::f16, DType::bf16})
    for (bool strided : {false, true}) {
      std::mt19937 rng(5);
      HostTensor x(TensorType(d, {2, 3, 9, 8})), w(TensorType(d, {6, 3, 3, 3})), b(TensorType(d, {6}));
      HostTensor residual(strided ? TensorType(d, {2, 6, 9, 8}, {432, 1, 48, 6})  // stored N, H, W, C
                                  : TensorType(d, {2, 6, 9, 8}));
      for (HostTensor* t : {&x, &w, &b, &residual}) fill_random(*t, rng, -2.0, 2.0);
      Attrs attrs = conv_attrs(ConvCase{{2, 3, 9, 8}, {6, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true});
      auto conv = run_op("conv2d", {&x, &w, &b}, attrs);
      auto sum = run_op("add", {&conv[0], &residual});
      auto want = run_op("relu", {&sum[0]});
      attrs.set("relu", true);
      auto fused = run_op("conv2d_fused", {&x, &w, &b, &residual}, attrs);
      EXPECT_EQ(fused[0].bytes, want[0].bytes) << dtype_name(d) << (strided ? " strided residual" : "");
    }
}

TEST(Conv2d, ShapeErrors) {
  Attrs groups2;
  groups2.set("groups", int64_t{2});
  expect_contains(build_error("conv2d", {TensorType(DType::f32, {1, 4, 5, 5}), TensorType(DType::f32, {6, 3, 3, 3})}),
                  "has 4 channels but weight [6,3,3,3] with groups 1 expects 3");
  expect_contains(
      build_error("conv2d", {TensorType(DType::f32, {1, 4, 5, 5}), TensorType(DType::f32, {5, 2, 3, 3})}, groups2),
      "not divisible by groups 2");
  expect_contains(build_error("conv2d", {TensorType(DType::f32, {1, 3, 2, 2}), TensorType(DType::f32, {4, 3, 3, 3})}),
                  "larger than the padded input");
  expect_contains(build_error("conv2d", {TensorType(DType::f32, {1, 3, 5, 5}), TensorType(DType::f32, {4, 3, 3, 3}),
                                         TensorType(DType::f32, {3})}),
                  "bias must be [4]");
  expect_contains(build_error("conv2d", {TensorType(DType::i32, {1, 3, 5, 5}), TensorType(DType::i32, {4, 3, 3, 3})}),
                  "floating-point");
  expect_contains(build_error("conv2d", {TensorType(DType::f32, {3, 5, 5, 1, 1}), TensorType(DType::f32, {4, 3, 3, 3})}),
                  "[N, C, H, W]");
}

}  // namespace
}  // namespace kiln::nn_test
