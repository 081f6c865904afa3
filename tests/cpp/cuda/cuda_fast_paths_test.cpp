// The fast paths of the generic CUDA kernels against the CPU reference: the
// warp-per-row kernel (and its block-kernel fallback), vectorized strided
// copies, and the packed f16/bf16 elementwise kernel, with the sizes,
// layouts and alignments that pick or refuse each path. Skips without a CUDA
// device.
#include <random>

#include "cuda_test_util.h"

namespace kiln::test {
namespace {

constexpr DType kHalfAndFloat[] = {DType::f16, DType::bf16, DType::f32};

// A tensor of `dims` laid out with `strides` in its own storage, random values.
HostTensor random_layout(DType d, const Dims& dims, const Dims& strides, std::mt19937& rng) {
  HostTensor t = alloc_tensor(TensorType(d, dims, strides));
  for_each_index(dims, [&](const Dims& i) { t.set(i, random_value(d, Fill::continuous, rng)); });
  return t;
}

// A view of `base`'s storage as dims/strides.
HostTensor view_of(const HostTensor& base, const Dims& dims, const Dims& strides) {
  HostTensor v = base;
  v.type = TensorType(base.type.dtype, dims, strides);
  return v;
}

Attrs dim_attr(int64_t dim) {
  Attrs a;
  a.set("dim", dim);
  return a;
}

Attrs layer_norm_attrs(int64_t normalized_rank = 1) {
  Attrs a;
  a.set("eps", 1e-5);
  a.set("normalized_rank", normalized_rank);
  return a;
}

// softmax, log_softmax over the last dim, and layer_norm with and without
// weight and bias (weight and bias of `param` dtype), of x.
void check_rows(HostTensor& x, DType param, const std::string& tag, std::mt19937& rng, size_t shift = 0) {
  const int64_t len = x.type.dims.back();
  EXPECT_TRUE(check_op("softmax", {&x}, dim_attr(-1), "softmax " + tag, 4.0, shift));
  EXPECT_TRUE(check_op("log_softmax", {&x}, dim_attr(-1), "log_softmax " + tag, 4.0, shift));
  HostTensor w = random_tensor(param, {len}, rng), b = random_tensor(param, {len}, rng);
  EXPECT_TRUE(check_op("layer_norm", {&x, &w, &b}, layer_norm_attrs(), "layer_norm " + tag, 8.0, shift));
  EXPECT_TRUE(check_op("layer_norm", {&x, &w}, layer_norm_attrs(), "layer_norm weight only " + tag, 8.0, shift));
  EXPECT_TRUE(check_op("layer_norm", {&x}, layer_norm_attrs(), "layer_norm no affine " + tag, 8.0, shift));
}

TEST(CudaFastPaths, ContiguousRowsMatchCpu) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(21);
  for (DType d : kHalfAndFloat)
    for (int64_t len : {1, 31, 32, 33, 127, 768, 1000, 2048, 2049}) {
      // 37 rows: several blocks of warps and a partial one. 2049 takes the block kernel.
      HostTensor x = random_tensor(d, {37, len}, rng);
      check_rows(x, d, str_cat(dtype_name(d), " rows of ", len), rng);
    }
}

TEST(CudaFastPaths, RowLayoutsAndAlignment) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(22);
  for (DType d : kHalfAndFloat) {
    const std::string tag(dtype_name(d));
    // Rows contiguous, kept dims transposed (two kept dims after collapsing): the block kernel.
    HostTensor t = random_layout(d, {5, 7, 64}, {64, 5 * 64, 1}, rng);
    check_rows(t, d, "transposed rows " + tag, rng);
    // Rows padded to an odd stride: the warp kernel without vector access.
    HostTensor p = random_layout(d, {9, 96}, {97, 1}, rng);
    check_rows(p, d, "padded rows " + tag, rng);
    // Rows padded to a stride of whole 16-byte vectors: the warp kernel's row stride with vector access.
    HostTensor v = random_layout(d, {9, 96}, {104, 1}, rng);
    check_rows(v, d, "vector-padded rows " + tag, rng);
    // Misaligned input and output pointers.
    HostTensor x = random_tensor(d, {6, 256}, rng);
    check_rows(x, d, "shifted rows " + tag, rng, dtype_size(d));
    // Parameters of another dtype than the input.
    check_rows(x, d == DType::f32 ? DType::f16 : DType::f32, "mixed parameters " + tag, rng);
    // Strided rows take the block kernel.
    HostTensor s = random_tensor(d, {4, 6, 33}, rng, true);
    check_rows(s, d, "strided rows " + tag, rng);
    // layer_norm over two contiguous dims: one row of 3 * 40 after collapsing.
    HostTensor y = random_tensor(d, {6, 3, 40}, rng);
    HostTensor w = random_tensor(d, {3, 40}, rng), b = random_tensor(d, {3, 40}, rng);
    EXPECT_TRUE(check_op("layer_norm", {&y, &w, &b}, layer_norm_attrs(2), "layer_norm rank 2 " + tag, 8.0));
  }
}

TEST(CudaFastPaths, SoftmaxOfInfiniteRows) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(23);
  for (DType d : kHalfAndFloat)
    for (int64_t len : {5, 64, 3000}) {
      HostTensor x = random_tensor(d, {3, len}, rng);
      for (int64_t k = 0; k < len; ++k) {
        x.set({1, k}, -INFINITY);  // row 1: all -inf gives NaN, like torch
        if (k % 3 == 0) x.set({2, k}, -INFINITY);
      }
      const std::string tag = str_cat(dtype_name(d), " rows of ", len);
      EXPECT_TRUE(check_op("softmax", {&x}, dim_attr(-1), "softmax -inf " + tag, 4.0));
      EXPECT_TRUE(check_op("log_softmax", {&x}, dim_attr(-1), "log_softmax -inf " + tag, 4.0));
    }
}

TEST(CudaFastPaths, PermutedCopiesMatchCpu) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(24);
  for (DType d : {DType::f16, DType::bf16, DType::f32, DType::i64, DType::u8, DType::boolean}) {
    const std::string tag(dtype_name(d));
    // [B, S, H, D] -> [B, H, S, D] and back: 16-byte words along D.
    HostTensor bshd = random_tensor(d, {2, 197, 12, 64}, rng);
    HostTensor bhsd = view_of(bshd, {2, 12, 197, 64}, {197 * 12 * 64, 64, 12 * 64, 1});
    EXPECT_TRUE(check_op("contiguous", {&bhsd}, {}, "heads split " + tag));
    HostTensor heads = random_tensor(d, {2, 12, 197, 64}, rng);
    HostTensor merged = view_of(heads, {2, 197, 12, 64}, {12 * 197 * 64, 64, 197 * 64, 1});
    EXPECT_TRUE(check_op("contiguous", {&merged}, {}, "heads merge " + tag));
    // copies (pair_copies): a key and a value split from one buffer, moved in one launch; with a third of
    // another layout they take one launch each.
    HostTensor bshd2 = random_tensor(d, {2, 197, 12, 64}, rng);
    HostTensor bhsd2 = view_of(bshd2, {2, 12, 197, 64}, {197 * 12 * 64, 64, 12 * 64, 1});
    EXPECT_TRUE(check_op("copies", {&bhsd, &bhsd2}, {}, "copies of a key and a value " + tag));
    EXPECT_TRUE(check_op("copies", {&bhsd, &bhsd2, &merged}, {}, "copies of mixed layouts " + tag));
    // Misaligned for wide words by one element, and by 4 and 8 bytes: narrower words or none. (Never below
    // the element's own alignment, which every tensor has: an 8-byte element at a 4-byte address faults.)
    for (size_t shift : {dtype_size(d), size_t{4}, size_t{8}})
      if (shift % dtype_size(d) == 0)
        EXPECT_TRUE(check_op("contiguous", {&bhsd}, {}, str_cat("heads split shifted ", shift, " ", tag), 1.0, shift));
    // Odd shapes: an innermost dim of 6 (4-byte words for 2-byte types), of 7, and a transposed innermost dim.
    HostTensor six = random_tensor(d, {5, 3, 6}, rng);
    HostTensor six_t = view_of(six, {3, 5, 6}, {6, 18, 1});
    EXPECT_TRUE(check_op("contiguous", {&six_t}, {}, "innermost 6 " + tag));
    HostTensor seven = random_tensor(d, {5, 3, 7}, rng);
    HostTensor seven_t = view_of(seven, {3, 5, 7}, {7, 21, 1});
    EXPECT_TRUE(check_op("contiguous", {&seven_t}, {}, "innermost 7 " + tag));
    HostTensor cols = view_of(seven, {7, 3, 5}, {1, 7, 21});
    EXPECT_TRUE(check_op("contiguous", {&cols}, {}, "transposed innermost " + tag));
    // Concat along the last dim: strided destinations, aligned ([4, 32]) and not ([4, 27]).
    HostTensor a = random_tensor(d, {4, 8}, rng), b = random_tensor(d, {4, 16}, rng), c = random_tensor(d, {4, 3}, rng);
    EXPECT_TRUE(check_op("concat", {&a, &b, &a}, dim_attr(1), "concat last dim " + tag));
    EXPECT_TRUE(check_op("concat", {&a, &c, &b}, dim_attr(1), "concat last dim, odd " + tag));
    Attrs pad;
    pad.set("pad", std::vector<int64_t>{8, 8, 1, 0});
    pad.set("value", 0.0);
    EXPECT_TRUE(check_op("constant_pad", {&b}, pad, "constant_pad " + tag));
  }
}

TEST(CudaFastPaths, IndexedCopiesMatchCpu) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(25);
  for (DType d : {DType::f16, DType::f32}) {
    const std::string tag(dtype_name(d));
    HostTensor table = random_tensor(d, {50, 64}, rng);
    HostTensor ids = random_tensor(DType::i64, {3, 17}, rng);
    for_each_index(ids.type.dims, [&](const Dims& i) { ids.set(i, static_cast<double>((i[0] * 17 + i[1] * 7) % 50)); });
    EXPECT_TRUE(check_op("embedding", {&table, &ids}, {}, "embedding " + tag));
    HostTensor x = random_tensor(d, {6, 10, 12}, rng);
    HostTensor idx = random_tensor(DType::i32, {6, 4, 12}, rng);
    for_each_index(idx.type.dims, [&](const Dims& i) { idx.set(i, static_cast<double>((i[0] + i[1] * 3 + i[2]) % 10)); });
    EXPECT_TRUE(check_op("gather", {&x, &idx}, dim_attr(1), "gather " + tag));
  }
}

TEST(CudaFastPaths, PackedElementwiseMatchesCpu) {
  KILN_REQUIRE_CUDA();
  std::mt19937 rng(26);
  for (DType d : kHalfAndFloat) {
    const std::string tag(dtype_name(d));
    struct Case {
      Dims a, b;
      bool strided_a;
      const char* what;
    };
    for (const Case& c : {Case{{4, 768}, {768}, false, "bias row"}, Case{{4, 769}, {769}, false, "odd bias row"},
                          Case{{37, 1000}, {37, 1000}, false, "linear"}, Case{{4099}, {4099}, false, "odd length"},
                          Case{{3, 1, 7}, {5, 7}, false, "broadcast both"}, Case{{6, 16}, {6, 1}, false, "column"},
                          Case{{2, 3, 8}, {1}, false, "scalar tensor"}, Case{{5, 16}, {5, 16}, true, "strided"},
                          Case{{2, 12, 197, 64}, {2, 12, 197, 64}, false, "residual"}}) {
      HostTensor a = random_tensor(d, c.a, rng, c.strided_a), b = random_tensor(d, c.b, rng);
      for (const char* op : {"add", "mul", "maximum"})
        EXPECT_TRUE(check_op(op, {&a, &b}, {}, str_cat(op, " ", c.what, " ", tag), 2.0));
    }
    HostTensor x = random_tensor(d, {1001}, rng);
    for (const char* op : {"neg", "exp", "gelu"}) EXPECT_TRUE(check_op(op, {&x}, {}, str_cat(op, " ", tag), 2.0));
    // Misaligned tensors take the one-element kernel; 16 bytes in, the packed one again.
    HostTensor p = random_tensor(d, {8, 64}, rng), q = random_tensor(d, {8, 64}, rng);
    for (size_t shift : {dtype_size(d), size_t{16}})
      EXPECT_TRUE(check_op("add", {&p, &q}, {}, str_cat("add shifted ", shift, " ", tag), 2.0, shift));
    // Three operands, one boolean.
    HostTensor cond = random_tensor(DType::boolean, {4, 24}, rng), y = random_tensor(d, {24}, rng);
    HostTensor z = random_tensor(d, {4, 24}, rng);
    EXPECT_TRUE(check_op("where", {&cond, &z, &y}, {}, "where " + tag));
    // Casts into f16/bf16 read an operand of another dtype.
    for (DType from : {DType::f32, DType::f16, DType::bf16, DType::i32}) {
      HostTensor f = random_tensor(from, {4, 100}, rng);
      Attrs cast;
      cast.set("dtype", d);
      EXPECT_TRUE(check_op("cast", {&f}, cast, str_cat("cast ", dtype_name(from), " -> ", tag)));
    }
  }
}

}  // namespace
}  // namespace kiln::test
