// attention against a naive double reference: L != S, default and explicit
// scale, causal (top-left), bool and additive masks with broadcasting, fully
// masked rows, broadcast batch dims, grouped-query heads, strided q/k/v,
// every floating dtype, and shape errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>

#include "nn_test_util.h"

namespace kiln::nn_test {
namespace {

struct SdpaCase {
  TensorType q, k, v;
  std::optional<TensorType> mask;
  bool causal = false;
  double scale = 0.0;
};

std::vector<double> reference_sdpa(const HostTensor& q, const HostTensor& k, const HostTensor& v,
                                   const HostTensor* mask, const SdpaCase& c, const Dims& out_dims) {
  const int64_t E = q.type.dims.back(), S = k.type.dims[k.type.rank() - 2];
  const double scale = c.scale != 0.0 ? c.scale : 1.0 / std::sqrt(double(E));
  const double inf = std::numeric_limits<double>::infinity();
  auto batch_of = [](const HostTensor& t) { return Dims(t.type.dims.begin(), t.type.dims.end() - 2); };
  // broadcast_index, except that k/v heads dividing q's (the last batch dim) are grouped-query heads.
  const Dims out_batch(out_dims.begin(), out_dims.end() - 2);
  auto operand_index = [&](const Dims& batch, const Dims& dims) {
    Dims index = batch;
    const int64_t heads = out_batch.empty() ? 1 : out_batch.back();
    if (!dims.empty() && dims.back() != 1 && dims.back() != heads)
      index.back() /= heads / dims.back();
    return broadcast_index(index, dims);
  };
  std::vector<double> out;
  for (int64_t flat = 0; flat < numel(out_dims); ++flat) {
    Dims oi = unravel(flat, out_dims);
    Dims batch(oi.begin(), oi.end() - 2);
    const int64_t i = oi[oi.size() - 2], e_out = oi.back();
    Dims bq = broadcast_index(batch, batch_of(q)), bk = operand_index(batch, batch_of(k)),
         bv = operand_index(batch, batch_of(v));
    std::vector<double> scores(static_cast<size_t>(S));
    for (int64_t j = 0; j < S; ++j) {
      double s = 0;
      for (int64_t e = 0; e < E; ++e) {
        Dims iq = bq, ik = bk;
        iq.insert(iq.end(), {i, e});
        ik.insert(ik.end(), {j, e});
        s += q.at(iq) * k.at(ik);
      }
      s *= scale;
      if (c.causal && j > i) s = -inf;
      if (mask) {
        Dims full = batch;
        full.insert(full.end(), {i, j});
        double m = mask->at(broadcast_index(full, mask->type.dims));
        if (mask->type.dtype == DType::boolean)
          s = m != 0 ? s : -inf;
        else
          s += m;
      }
      scores[static_cast<size_t>(j)] = s;
    }
    double max = -inf;
    for (double s : scores) max = std::max(max, s);
    if (max == -inf) {  // torch >= 2.5 (_safe_softmax): fully masked rows give zeros
      out.push_back(0.0);
      continue;
    }
    double sum = 0, acc = 0;
    for (int64_t j = 0; j < S; ++j) {
      double p = std::exp(scores[static_cast<size_t>(j)] - max);
      Dims iv = bv;
      iv.insert(iv.end(), {j, e_out});
      sum += p;
      acc += p * v.at(iv);
    }
    out.push_back(acc / sum);
  }
  return out;
}

std::vector<double> check_sdpa(const SdpaCase& c, const Dims& expect_dims, uint32_t seed = 11,
                               HostTensor* given_mask = nullptr) {
  std::mt19937 rng(seed);
  HostTensor q(c.q), k(c.k), v(c.v);
  fill_random(q, rng, -2, 2);
  fill_random(k, rng, -2, 2);
  fill_random(v, rng);
  std::optional<HostTensor> mask;
  if (c.mask && !given_mask) {
    mask.emplace(*c.mask);
    if (c.mask->dtype == DType::boolean) {
      fill_random(*mask, rng, 0.0, 1.3);  // rounds to true about 60% of the time
    } else {
      fill_random(*mask, rng, -3, 1);
    }
  }
  HostTensor* m = given_mask ? given_mask : (mask ? &*mask : nullptr);
  Attrs attrs;
  attrs.set("causal", c.causal);
  attrs.set("scale", c.scale);
  std::vector<HostTensor*> inputs = {&q, &k, &v};
  if (m) inputs.push_back(m);
  auto out = run_op("attention", inputs, attrs);
  [&] { ASSERT_EQ(out[0].type.dims, expect_dims); }();
  std::vector<double> want = reference_sdpa(q, k, v, m, c, expect_dims);
  expect_close(out[0], want, "sdpa q" + to_string(c.q) + " k" + to_string(c.k));
  return want;
}

TEST(Attention, UnmaskedLDifferentFromSEveryDtype) {
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16})
    check_sdpa({TensorType(d, {2, 3, 5, 8}), TensorType(d, {2, 3, 7, 8}), TensorType(d, {2, 3, 7, 6})},
               {2, 3, 5, 6});
  SdpaCase scaled{TensorType(DType::f32, {1, 4, 3}), TensorType(DType::f32, {1, 6, 3}),
                  TensorType(DType::f32, {1, 6, 5})};
  scaled.scale = 0.7;
  check_sdpa(scaled, {1, 4, 5});
}

TEST(Attention, CausalIsTopLeftAligned) {
  for (int64_t L : {3, 5, 9}) {
    SdpaCase c{TensorType(DType::f32, {2, L, 4}), TensorType(DType::f32, {2, 5, 4}), TensorType(DType::f32, {2, 5, 3})};
    c.causal = true;
    check_sdpa(c, {2, L, 3});
  }
  SdpaCase h{TensorType(DType::bf16, {1, 2, 6, 8}), TensorType(DType::bf16, {1, 2, 6, 8}),
             TensorType(DType::bf16, {1, 2, 6, 8})};
  h.causal = true;
  check_sdpa(h, {1, 2, 6, 8});
}

TEST(Attention, BoolAndAdditiveMasksBroadcast) {
  SdpaCase b{TensorType(DType::f32, {2, 3, 5, 4}), TensorType(DType::f32, {2, 3, 7, 4}),
             TensorType(DType::f32, {2, 3, 7, 2}), TensorType(DType::boolean, {5, 7})};
  check_sdpa(b, {2, 3, 5, 2});
  b.mask = TensorType(DType::boolean, {2, 1, 5, 7});
  check_sdpa(b, {2, 3, 5, 2});
  SdpaCase a = b;
  a.mask = TensorType(DType::f32, {1, 3, 1, 7});
  check_sdpa(a, {2, 3, 5, 2});
  for (DType d : {DType::f16, DType::f64}) {
    SdpaCase t{TensorType(d, {3, 5, 4}), TensorType(d, {3, 6, 4}), TensorType(d, {3, 6, 4}), TensorType(d, {5, 6})};
    check_sdpa(t, {3, 5, 4});
  }
}

TEST(Attention, FullyMaskedRowsGiveZeros) {
  SdpaCase c{TensorType(DType::f32, {1, 3, 4}), TensorType(DType::f32, {1, 5, 4}), TensorType(DType::f32, {1, 5, 2}),
             TensorType(DType::boolean, {3, 5})};
  HostTensor mask(TensorType(DType::boolean, {3, 5}));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j) mask.set({i, j}, i == 1 ? 0.0 : double((i + j) % 2));
  auto want = check_sdpa(c, {1, 3, 2}, 4, &mask);
  EXPECT_EQ(want[2], 0.0);  // row 1 of the reference is zeros; the kernel matched it
  EXPECT_EQ(want[3], 0.0);
  // The same with an additive -inf mask.
  SdpaCase a = c;
  a.mask = TensorType(DType::f32, {3, 5});
  HostTensor additive(TensorType(DType::f32, {3, 5}));
  for (int64_t j = 0; j < 5; ++j) additive.set({1, j}, -std::numeric_limits<double>::infinity());
  check_sdpa(a, {1, 3, 2}, 4, &additive);
}

TEST(Attention, BroadcastBatchAndStridedOperands) {
  // k and v shared by every batch and head.
  check_sdpa({TensorType(DType::f32, {2, 3, 5, 8}), TensorType(DType::f32, {1, 7, 8}),
              TensorType(DType::f32, {7, 6})},
             {2, 3, 5, 6});
  // q as a permute view of [B=2, L=5, H=3, E=4] memory to [B, H, L, E]; k transposed in memory.
  check_sdpa({TensorType(DType::f32, {2, 3, 5, 4}, {60, 4, 12, 1}), TensorType(DType::f32, {2, 3, 6, 4}, {72, 24, 1, 6}),
              TensorType(DType::f32, {2, 3, 6, 4})},
             {2, 3, 5, 4});
}

TEST(Attention, GroupedQueryHeads) {
  // 6 query heads over 2 and 3 key/value heads (heads 0-2 read k/v head 0, ...), with a mask and causal.
  check_sdpa({TensorType(DType::f32, {2, 6, 5, 8}), TensorType(DType::f32, {2, 2, 7, 8}),
              TensorType(DType::f32, {2, 2, 7, 4}), TensorType(DType::boolean, {2, 1, 5, 7})},
             {2, 6, 5, 4});
  SdpaCase c{TensorType(DType::bf16, {1, 6, 9, 16}), TensorType(DType::bf16, {1, 3, 9, 16}),
             TensorType(DType::bf16, {1, 3, 9, 16})};
  c.causal = true;
  check_sdpa(c, {1, 6, 9, 16});
  SdpaCase h{TensorType(DType::f16, {3, 4, 2}), TensorType(DType::f16, {1, 6, 2}), TensorType(DType::f16, {1, 6, 2})};
  check_sdpa(h, {3, 4, 2});  // rank 3: the one batch dim is the heads; 1 broadcasts
}

TEST(Attention, ShapeErrors) {
  auto err = [](std::vector<TensorType> t, bool causal = false) {
    Attrs a;
    a.set("causal", causal);
    return build_error("attention", std::move(t), a);
  };
  expect_contains(err({TensorType(DType::f32, {2, 5, 8}), TensorType(DType::f32, {2, 7, 6}),
                       TensorType(DType::f32, {2, 7, 6})}),
                  "k's last dim 6 must equal q's 8");
  expect_contains(err({TensorType(DType::f32, {2, 5, 8}), TensorType(DType::f32, {2, 7, 8}),
                       TensorType(DType::f32, {2, 6, 6})}),
                  "must have k's sequence length 7");
  expect_contains(err({TensorType(DType::f32, {2, 5, 8}), TensorType(DType::f32, {2, 7, 8}),
                       TensorType(DType::f32, {2, 7, 6}), TensorType(DType::boolean, {5, 7})},
                      true),
                  "cannot be combined with causal");
  expect_contains(err({TensorType(DType::f32, {2, 5, 8}), TensorType(DType::f32, {2, 7, 8}),
                       TensorType(DType::f32, {2, 7, 6}), TensorType(DType::i64, {5, 7})}),
                  "mask must be bool or f32");
  expect_contains(err({TensorType(DType::f32, {2, 5, 8}), TensorType(DType::f32, {2, 7, 8}),
                       TensorType(DType::f32, {2, 7, 6}), TensorType(DType::boolean, {5, 6})}),
                  "does not broadcast to [2,5,7]");
  expect_contains(err({TensorType(DType::f32, {2, 5, 8}), TensorType(DType::f16, {2, 7, 8}),
                       TensorType(DType::f32, {2, 7, 6})}),
                  "share one dtype");
  expect_contains(err({TensorType(DType::f32, {2, 4, 5, 8}), TensorType(DType::f32, {2, 3, 7, 8}),
                       TensorType(DType::f32, {2, 3, 7, 6})}),
                  "k/v heads must equal, divide or be 1");
  expect_contains(err({TensorType(DType::f32, {2, 4, 5, 8}), TensorType(DType::f32, {3, 4, 7, 8}),
                       TensorType(DType::f32, {3, 4, 7, 6})}),
                  "do not broadcast");
}

}  // namespace
}  // namespace kiln::nn_test
