// cuDNN convolutions (conv2d, conv2d_fused with ReLU, a residual and channels-last),
// pooling, inference batch norm and cuBLASLt GEMM epilogues (matmul_epilogue,
// its residual too) against the CPU reference kernels, for f32, f16 and bf16. Skips without a
// CUDA device.
#include <random>

#include "cuda_test_util.h"

namespace kiln::test {
namespace {

constexpr DType kConvTypes[] = {DType::f32, DType::f16, DType::bf16};

Attrs conv_attrs(std::vector<int64_t> stride, std::vector<int64_t> padding, std::vector<int64_t> dilation,
                 int64_t groups) {
  Attrs a;
  a.set("stride", std::move(stride));
  a.set("padding", std::move(padding));
  a.set("dilation", std::move(dilation));
  a.set("groups", groups);
  return a;
}

// NCHW dims -> NHWC dims.
Dims nhwc(const Dims& d) { return {d[0], d[2], d[3], d[1]}; }

// A random [..., M, N] tensor whose rows are `ld` elements apart (NaN between them).
HostTensor padded_rows(DType d, const Dims& dims, int64_t ld, std::mt19937& rng) {
  Dims strides(dims.size(), 1);
  strides[dims.size() - 2] = ld;
  for (size_t i = dims.size() - 2; i-- > 0;) strides[i] = strides[i + 1] * dims[i + 1];
  HostTensor t = poisoned(TensorType(d, dims, strides));
  for_each_index(dims, [&](const Dims& i) { t.set(i, random_value(d, Fill::continuous, rng)); });
  return t;
}

TEST(CudaConv, ConvolutionsMatchCpu) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(11);
  struct Case {
    Dims x, w;
    Attrs attrs;
    const char* name;
  };
  const Case cases[] = {
      {{2, 8, 9, 7}, {12, 8, 3, 3}, conv_attrs({1, 1}, {1, 1}, {1, 1}, 1), "3x3 pad 1"},
      {{1, 6, 11, 10}, {10, 6, 3, 3}, conv_attrs({2, 2}, {1, 0}, {1, 1}, 1), "stride 2"},
      {{2, 4, 12, 12}, {8, 4, 3, 3}, conv_attrs({1, 1}, {2, 2}, {2, 2}, 1), "dilation 2"},
      {{2, 8, 7, 7}, {12, 2, 3, 3}, conv_attrs({1, 1}, {1, 1}, {1, 1}, 4), "groups 4"},
      {{2, 16, 9, 9}, {16, 1, 3, 3}, conv_attrs({2, 2}, {1, 1}, {1, 1}, 16), "depthwise"},
      {{3, 32, 5, 6}, {24, 32, 1, 1}, conv_attrs({1, 1}, {0, 0}, {1, 1}, 1), "pointwise"},
  };
  for (DType d : kConvTypes) {
    for (const Case& c : cases) {
      const std::string tag = str_cat(c.name, " ", dtype_name(d));
      HostTensor x = random_tensor(d, c.x, rng), w = random_tensor(d, c.w, rng), b = random_tensor(d, {c.w[0]}, rng);
      EXPECT_TRUE(check_op("conv2d", {&x, &w}, c.attrs, "conv2d " + tag, 8.0));
      EXPECT_TRUE(check_op("conv2d", {&x, &w, &b}, c.attrs, "conv2d+bias " + tag, 8.0));
      Attrs fused = c.attrs;
      fused.set("relu", true);
      fused.set("channels_last", false);
      EXPECT_TRUE(check_op("conv2d_fused", {&x, &w, &b}, fused, "conv2d_fused relu " + tag, 8.0));
      // Channels-last: NHWC input, OHWI weight, NHWC result.
      HostTensor xl = random_tensor(d, nhwc(c.x), rng), wl = random_tensor(d, nhwc(c.w), rng);
      fused.set("channels_last", true);
      EXPECT_TRUE(check_op("conv2d_fused", {&xl, &wl, &b}, fused, "conv2d_fused nhwc relu " + tag, 8.0));
      fused.set("relu", false);
      EXPECT_TRUE(check_op("conv2d_fused", {&xl, &wl}, fused, "conv2d_fused nhwc " + tag, 8.0));
      // A residual (a ResNet block's skip connection) added before the ReLU, NCHW and NHWC.
      const std::vector<TensorType> operands = {x.type, w.type};
      const Dims y = get_op("conv2d").infer(operands, c.attrs)[0].dims;
      HostTensor r = random_tensor(d, y, rng), rl = random_tensor(d, nhwc(y), rng);
      fused.set("relu", true);
      fused.set("channels_last", false);
      EXPECT_TRUE(check_op("conv2d_fused", {&x, &w, &b, &r}, fused, "conv2d_fused residual relu " + tag, 8.0));
      fused.set("channels_last", true);
      EXPECT_TRUE(check_op("conv2d_fused", {&xl, &wl, &b, &rl}, fused, "conv2d_fused nhwc residual relu " + tag, 8.0));
      fused.set("relu", false);
      EXPECT_TRUE(check_op("conv2d_fused", {&xl, &wl, &b, &rl}, fused, "conv2d_fused nhwc residual " + tag, 8.0));
    }
  }
}

TEST(CudaConv, F64IsUnsupportedWithAReason) {
  KILN_REQUIRE_CUDA();
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f64, {1, 2, 5, 5}));
  Value* w = g.add_input("w", TensorType(DType::f64, {3, 2, 3, 3}));
  Node* conv = g.add_node(get_op("conv2d"), {x, w}, conv_attrs({1, 1}, {0, 0}, {1, 1}, 1));
  std::string why;
  EXPECT_FALSE(make_backend(Device{DeviceKind::cuda, 0})->supports(*conv, &why));
  EXPECT_NE(why.find("f64"), std::string::npos) << why;
}

TEST(CudaPool, PoolsMatchCpu) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(12);
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    const std::string tag(dtype_name(d));
    for (bool channels_last : {false, true}) {
      const Dims dims = channels_last ? Dims{2, 11, 9, 5} : Dims{2, 5, 11, 9};
      HostTensor x = random_tensor(d, dims, rng, !channels_last);  // strided NCHW reads too
      const std::string where = str_cat(tag, channels_last ? " nhwc" : " nchw");
      Attrs mp;
      mp.set("kernel_size", std::vector<int64_t>{3, 3});
      mp.set("stride", std::vector<int64_t>{2, 2});
      mp.set("padding", std::vector<int64_t>{1, 1});
      mp.set("dilation", std::vector<int64_t>{1, 2});
      mp.set("ceil_mode", true);
      mp.set("channels_last", channels_last);
      EXPECT_TRUE(check_op("max_pool2d", {&x}, mp, "max_pool2d " + where));
      Attrs ap;
      ap.set("kernel_size", std::vector<int64_t>{3, 2});
      ap.set("stride", std::vector<int64_t>{2, 1});
      ap.set("padding", std::vector<int64_t>{1, 1});
      ap.set("ceil_mode", true);
      ap.set("count_include_pad", false);
      ap.set("channels_last", channels_last);
      EXPECT_TRUE(check_op("avg_pool2d", {&x}, ap, "avg_pool2d " + where));
      ap.set("count_include_pad", true);
      ap.set("divisor_override", int64_t{5});
      EXPECT_TRUE(check_op("avg_pool2d", {&x}, ap, "avg_pool2d divisor " + where));
      for (std::vector<int64_t> size : {std::vector<int64_t>{1, 1}, std::vector<int64_t>{4, 3}}) {
        Attrs ad;
        ad.set("output_size", size);
        ad.set("channels_last", channels_last);
        EXPECT_TRUE(check_op("adaptive_avg_pool2d", {&x}, ad, "adaptive_avg_pool2d " + where));
      }
    }
  }
}

TEST(CudaBatchNorm, MatchesCpu) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(13);
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    HostTensor x = random_tensor(d, {3, 6, 5, 4}, rng);
    HostTensor mean = random_tensor(DType::f32, {6}, rng), var = random_tensor(DType::f32, {6}, rng);
    HostTensor w = random_tensor(d, {6}, rng), b = random_tensor(d, {6}, rng);
    for_each_index(var.type.dims, [&](const Dims& i) { var.set(i, 0.5 + std::abs(var.at(i))); });
    Attrs eps;
    eps.set("eps", 1e-3);
    EXPECT_TRUE(check_op("batch_norm", {&x, &mean, &var, &w, &b}, eps, str_cat("batch_norm ", dtype_name(d))));
    EXPECT_TRUE(check_op("batch_norm", {&x, &mean, &var}, eps, str_cat("batch_norm no affine ", dtype_name(d))));
    // Strided (permuted, padded) and channels-last inputs: copied into the output, normalized there.
    HostTensor xs = random_tensor(d, {3, 6, 5, 4}, rng, true);
    EXPECT_TRUE(check_op("batch_norm", {&xs, &mean, &var, &w, &b}, eps, str_cat("batch_norm strided ", dtype_name(d))));
    HostTensor xc = random_tensor(d, {3, 6, 5, 4}, rng);
    xc.type = TensorType(d, {3, 6, 5, 4}, {120, 1, 24, 6});
    EXPECT_TRUE(check_op("batch_norm", {&xc, &mean, &var, &w, &b}, eps,
                         str_cat("batch_norm channels-last ", dtype_name(d))));
  }
}

TEST(CudaEpilogue, MatmulEpilogueMatchesCpu) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(14);
  for (DType d : kConvTypes) {
    for (const char* act : {"none", "relu", "gelu", "gelu_tanh"}) {
      for (const Dims& a_dims : {Dims{7, 32}, Dims{2, 5, 32}}) {
        HostTensor a = random_tensor(d, a_dims, rng), b = random_tensor(d, {32, 24}, rng);
        HostTensor bias = random_tensor(d, {24}, rng);
        Attrs attrs;
        attrs.set("activation", std::string(act));
        const std::string tag = str_cat("matmul_epilogue ", act, " ", dtype_name(d), " [", dims_to_string(a_dims), "]");
        EXPECT_TRUE(check_op("matmul_epilogue", {&a, &b, &bias}, attrs, tag + " +bias", 8.0));
        EXPECT_TRUE(check_op("matmul_epilogue", {&a, &b}, attrs, tag, 8.0));
      }
    }
  }
}

// The residual as cuBLASLt's C (dense: D's layout) and copied to D first
// (rows of their own leading dimension, also misaligned; strided columns).
TEST(CudaEpilogue, MatmulEpilogueResidualMatchesCpu) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(15);
  Attrs attrs;
  attrs.set("activation", std::string("none"));
  for (DType d : kConvTypes) {
    for (const Dims& a_dims : {Dims{7, 32}, Dims{2, 5, 32}}) {
      HostTensor a = random_tensor(d, a_dims, rng), b = random_tensor(d, {32, 24}, rng);
      HostTensor bias = random_tensor(d, {24}, rng);
      Dims out = a_dims;
      out.back() = 24;
      HostTensor dense = random_tensor(d, out, rng), padded = padded_rows(d, out, 32, rng);
      HostTensor strided = random_tensor(d, out, rng, true);
      const std::string tag = str_cat("matmul_epilogue residual ", dtype_name(d), " [", dims_to_string(a_dims), "]");
      EXPECT_TRUE(check_op("matmul_epilogue", {&a, &b, &bias, &dense}, attrs, tag + " dense", 8.0));
      EXPECT_TRUE(check_op("matmul_epilogue", {&a, &b, &bias, &padded}, attrs, tag + " padded rows", 8.0));
      EXPECT_TRUE(check_op("matmul_epilogue", {&a, &b, &bias, &padded}, attrs, tag + " misaligned", 8.0,
                           dtype_size(d)));
      EXPECT_TRUE(check_op("matmul_epilogue", {&a, &b, &bias, &strided}, attrs, tag + " strided", 8.0));
    }
  }
}

TEST(CudaEpilogue, ResidualIsCOrCopiedToD) {
  KILN_REQUIRE_CUDA();
  Graph g;
  Value* a = g.add_input("a", TensorType(DType::f16, {64, 128}));
  Value* w = g.add_input("w", TensorType(DType::f16, {256, 128}));
  Value* bias = g.add_input("bias", TensorType(DType::f16, {256}));
  Value* dense = g.add_input("dense", TensorType(DType::f16, {64, 256}));
  Value* rt = g.add_input("rt", TensorType(DType::f16, {256, 64}));
  Attrs perm;
  perm.set("dims", std::vector<int64_t>{1, 0});
  Value* wt = g.add_node(get_op("permute"), {w}, perm)->outputs[0];
  Value* transposed = g.add_node(get_op("permute"), {rt}, perm)->outputs[0];  // unit stride down the columns
  Attrs attrs;
  attrs.set("activation", std::string("none"));
  auto backend = make_backend(Device{DeviceKind::cuda, 0});
  const std::string as_c = backend->lower(*g.add_node(get_op("matmul_epilogue"), {a, wt, bias, dense}, attrs))->describe();
  EXPECT_NE(as_c.find("residual as C"), std::string::npos) << as_c;
  EXPECT_NE(as_c.find("cuBLASLt epilogue"), std::string::npos) << as_c;
  const std::string copied =
      backend->lower(*g.add_node(get_op("matmul_epilogue"), {a, wt, bias, transposed}, attrs))->describe();
  EXPECT_NE(copied.find("residual copied to D"), std::string::npos) << copied;
}

TEST(CudaEpilogue, BiasAndReluRunInsideCublasLt) {
  KILN_REQUIRE_CUDA();
  Graph g;
  Value* a = g.add_input("a", TensorType(DType::f16, {64, 128}));
  Value* w = g.add_input("w", TensorType(DType::f16, {256, 128}));
  Value* bias = g.add_input("bias", TensorType(DType::f16, {256}));
  Attrs perm;
  perm.set("dims", std::vector<int64_t>{1, 0});
  Value* wt = g.add_node(get_op("permute"), {w}, perm)->outputs[0];  // a linear weight, read transposed
  Attrs attrs;
  attrs.set("activation", std::string("relu"));
  Node* mm = g.add_node(get_op("matmul_epilogue"), {a, wt, bias}, attrs);
  auto kernel = make_backend(Device{DeviceKind::cuda, 0})->lower(*mm);
  EXPECT_NE(kernel->describe().find("cuBLASLt epilogue"), std::string::npos) << kernel->describe();
}

}  // namespace
}  // namespace kiln::test
