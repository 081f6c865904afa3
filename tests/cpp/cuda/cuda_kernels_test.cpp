// Each CUDA kernel against the CPU reference kernel, on random data with odd
// sizes, broadcasting and strided (permuted, padded) inputs, for every dtype
// the CUDA backend claims. Skips without a CUDA device.
#include <random>

#include "cuda_test_util.h"

namespace kiln::test {
namespace {

constexpr DType kFloats[] = {DType::f32, DType::f16, DType::bf16, DType::f64};
constexpr DType kAll[] = {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i64,
                          DType::i32, DType::i16,  DType::i8,   DType::u8,  DType::boolean};

TEST(CudaBackend, MakeBackendExplainsWhenUnavailable) {
  std::string why;
  if (cuda_available(&why)) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(why.empty());
  expect_error([] { make_backend(Device{DeviceKind::cuda, 0}); }, {"cuda:0"});
}

TEST(CudaBackend, UnsupportedOpsSayWhy) {
  KILN_REQUIRE_CUDA();
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::i64, {1, 3, 8, 8}));  // CUDA pools are floating-only
  Node* pool = g.add_node(get_op("max_pool2d"), {x}, [] {
    Attrs a;
    a.set("kernel_size", std::vector<int64_t>{2, 2});
    return a;
  }());
  auto backend = make_backend(Device{DeviceKind::cuda, 0});
  std::string why;
  EXPECT_FALSE(backend->supports(*pool, &why));
  EXPECT_NE(why.find("max_pool2d"), std::string::npos) << why;
  expect_error([&] { backend->lower(*pool); }, {"node '", "cuda:0"});
}

TEST(CudaKernels, ElementwiseMatchesCpu) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(7);
  int checked = 0;
  for (const OpDef* op : all_ops()) {
    if (!op->elementwise) continue;
    const int arity = op->elementwise->arity;
    for (DType d : kAll) {
      // Shapes broadcast into [3, 5, 7]; operand 1 is strided.
      const Dims shapes[3] = {{3, 1, 7}, {5, 7}, {1}};
      std::vector<HostTensor> ts;
      for (int k = 0; k < arity; ++k) {
        DType dk = (op->elementwise->kind == ElementwiseKind::select && k == 0) ? DType::boolean : d;
        ts.push_back(random_tensor(dk, shapes[k], rng, k == 1,
                                   op->name == "pow" || op->name == "log" || op->name == "sqrt" ? Fill::continuous
                                   : is_floating(dk)                                           ? Fill::continuous
                                                                                                : Fill::small_ints));
      }
      std::vector<HostTensor*> ptrs;
      for (HostTensor& t : ts) ptrs.push_back(&t);
      if (check_op(op->name, ptrs, {}, op->name + " " + std::string(dtype_name(d)), 2.0)) ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(CudaKernels, CastMatchesCpu) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(11);
  for (DType from : kAll)
    for (DType to : kAll) {
      HostTensor x = random_tensor(from, {4, 9, 3}, rng, true);
      Attrs a;
      a.set("dtype", to);
      EXPECT_TRUE(check_op("cast", {&x}, a, str_cat("cast ", dtype_name(from), " -> ", dtype_name(to))));
    }
}

TEST(CudaKernels, DataOpsMatchCpu) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(3);
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::i64, DType::boolean}) {
    const std::string tag = std::string(dtype_name(d));
    HostTensor x = random_tensor(d, {3, 5, 7}, rng, true);
    EXPECT_TRUE(check_op("contiguous", {&x}, {}, "contiguous " + tag));

    HostTensor a = random_tensor(d, {3, 2, 7}, rng), b = random_tensor(d, {3, 4, 7}, rng, true);
    Attrs cat;
    cat.set("dim", int64_t{1});
    EXPECT_TRUE(check_op("concat", {&a, &x, &b}, cat, "concat " + tag));

    Attrs pad;
    pad.set("pad", std::vector<int64_t>{2, -1, 0, 3});
    pad.set("value", 1.5);
    EXPECT_TRUE(check_op("constant_pad", {&x}, pad, "constant_pad " + tag));

    HostTensor idx = random_tensor(DType::i64, {6}, rng);
    for (int64_t i = 0; i < 6; ++i) idx.set({i}, static_cast<double>((i * 3) % 5));
    Attrs sel;
    sel.set("dim", int64_t{1});
    EXPECT_TRUE(check_op("index_select", {&x, &idx}, sel, "index_select " + tag));

    HostTensor table = random_tensor(d, {11, 6}, rng, true);
    HostTensor ids = random_tensor(DType::i32, {2, 5}, rng);
    for_each_index(ids.type.dims, [&](const Dims& i) { ids.set(i, static_cast<double>((i[0] * 5 + i[1] * 7) % 11)); });
    EXPECT_TRUE(check_op("embedding", {&table, &ids}, {}, "embedding " + tag));
  }
  for (DType d : {DType::f32, DType::f16, DType::i64, DType::i32}) {
    Attrs full;
    full.set("shape", std::vector<int64_t>{3, 0 + 5});
    full.set("value", 2.0);
    full.set("dtype", d);
    EXPECT_TRUE(check_op("full", {}, full, "full"));
    Attrs ar;
    ar.set("start", -3.0);
    ar.set("end", 17.0);
    ar.set("step", 1.5);
    ar.set("dtype", d);
    EXPECT_TRUE(check_op("arange", {}, ar, "arange"));
  }
}

TEST(CudaKernels, MatmulMatchesCpu) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(5);
  for (DType d : kFloats) {
    const std::string tag = std::string(dtype_name(d));
    struct Case {
      Dims a, b;
    };
    for (const Case& c : {Case{{7, 13}, {13, 5}}, Case{{3, 7, 13}, {13, 5}}, Case{{2, 3, 4, 9}, {2, 3, 9, 6}},
                          Case{{13}, {13, 5}}, Case{{7, 13}, {13}}, Case{{1, 17}, {17, 33}}, Case{{5, 6, 8}, {1, 8, 2}}}) {
      HostTensor a = random_tensor(d, c.a, rng), b = random_tensor(d, c.b, rng);
      check_op("matmul", {&a, &b}, {}, str_cat("matmul ", tag, " [", dims_to_string(c.a), "] x [", dims_to_string(c.b), "]"), 8.0);
    }
    // Batch dims that do not collapse into one strided batch: unsupported, with a reason.
    {
      Graph g;
      Value* a = g.add_input("a", TensorType(d, {4, 1, 6, 8}));
      Value* b = g.add_input("b", TensorType(d, {3, 8, 2}));
      Node* mm = g.add_node(get_op("matmul"), {a, b});
      std::string why;
      EXPECT_FALSE(make_backend(Device{DeviceKind::cuda, 0})->supports(*mm, &why));
      EXPECT_NE(why.find("one strided batch"), std::string::npos) << why;
    }
    // A transposed weight: b = W^T read through its strides, never copied.
    HostTensor w = random_tensor(d, {5, 13}, rng);
    HostTensor wt = w;
    wt.type = TensorType(d, {13, 5}, {1, 13});
    HostTensor x = random_tensor(d, {2, 7, 13}, rng);
    EXPECT_TRUE(check_op("matmul", {&x, &wt}, {}, "matmul transposed weight " + tag, 8.0));
    // A transposed activation (column-major a).
    HostTensor at = random_tensor(d, {13, 7}, rng);
    at.type = TensorType(d, {7, 13}, {1, 7});
    HostTensor b = random_tensor(d, {13, 6}, rng);
    EXPECT_TRUE(check_op("matmul", {&at, &b}, {}, "matmul transposed a " + tag, 8.0));
  }
}

TEST(CudaKernels, NormsMatchCpu) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(9);
  for (DType d : kFloats) {
    const std::string tag = std::string(dtype_name(d));
    HostTensor x = random_tensor(d, {4, 37, 5}, rng, true);
    for (int64_t dim : {1, -1, 0}) {
      Attrs a;
      a.set("dim", dim);
      EXPECT_TRUE(check_op("softmax", {&x}, a, str_cat("softmax dim ", dim, " ", tag), 4.0));
      EXPECT_TRUE(check_op("log_softmax", {&x}, a, str_cat("log_softmax dim ", dim, " ", tag), 4.0));
    }
    HostTensor big = random_tensor(d, {3, 1000}, rng);
    Attrs last;
    last.set("dim", int64_t{-1});
    EXPECT_TRUE(check_op("softmax", {&big}, last, "softmax long rows " + tag, 4.0));

    HostTensor y = random_tensor(d, {6, 3, 33}, rng, true);
    HostTensor w = random_tensor(d, {33}, rng), b = random_tensor(d, {33}, rng);
    Attrs ln;
    ln.set("eps", 1e-5);
    EXPECT_TRUE(check_op("layer_norm", {&y, &w, &b}, ln, "layer_norm " + tag, 8.0));
    EXPECT_TRUE(check_op("layer_norm", {&y}, ln, "layer_norm no affine " + tag, 8.0));
    HostTensor w2 = random_tensor(d, {3, 33}, rng);
    Attrs ln2;
    ln2.set("normalized_rank", int64_t{2});
    EXPECT_TRUE(check_op("layer_norm", {&y, &w2}, ln2, "layer_norm rank 2 " + tag, 8.0));
  }
}

TEST(CudaKernels, ReductionsMatchCpu) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(13);
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::boolean}) {
    HostTensor x = random_tensor(d, {5, 6, 7}, rng, true, Fill::small_ints);
    for (const std::vector<int64_t>& dims : {std::vector<int64_t>{1}, {0, 2}, {}, {-1}})
      for (bool keep : {false, true})
        for (const char* op : {"sum", "mean", "amax", "amin"}) {
          Attrs a;
          a.set("dims", dims);
          a.set("keepdim", keep);
          check_op(op, {&x}, a, str_cat(op, " ", dtype_name(d), " dims [", dims_to_string(dims), "] keepdim ", keep),
                   4.0);
        }
  }
}

TEST(CudaKernels, CumsumMatchesCpu) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(17);
  for (DType d : kAll) {
    const std::string tag = std::string(dtype_name(d));
    HostTensor x = random_tensor(d, {4, 9, 3}, rng, true, is_floating(d) ? Fill::continuous : Fill::small_ints);
    for (int64_t dim : {0, 1, -1}) {
      Attrs a;
      a.set("dim", dim);
      EXPECT_TRUE(check_op("cumsum", {&x}, a, str_cat("cumsum dim ", dim, " strided ", tag), 4.0));
    }
    HostTensor rows = random_tensor(d, {37, 130}, rng, false, is_floating(d) ? Fill::continuous : Fill::small_ints);
    Attrs last;
    last.set("dim", int64_t{-1});
    EXPECT_TRUE(check_op("cumsum", {&rows}, last, "cumsum long rows " + tag, 8.0));
    HostTensor scalar = random_tensor(d, {}, rng);
    Attrs zero;
    zero.set("dim", int64_t{0});
    EXPECT_TRUE(check_op("cumsum", {&scalar}, zero, "cumsum 0-d " + tag));
  }
}

}  // namespace
}  // namespace kiln::test
