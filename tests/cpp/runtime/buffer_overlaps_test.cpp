// BufferOverlapChecker against the all-pairs rule it replaces: random layouts
// of outputs, inputs and weights in one buffer, the answer compared with a
// brute-force scan; plus the cases by name (adjacent is not overlapping, empty
// tensors never overlap, strided views span from the first to the last
// element, weights may overlap each other, a rebind moves a weight's range).
#include "runtime/buffer_overlaps.h"

#include <gtest/gtest.h>

#include <random>

namespace kiln {
namespace {

TensorView at(std::vector<float>& buffer, size_t offset, Dims dims, Dims strides = {}) {
  TensorType t = strides.empty() ? TensorType(DType::f32, dims) : TensorType(DType::f32, dims, strides);
  return TensorView(buffer.data() + offset, t);
}

ByteRange range_of(const TensorView& v) { return byte_range(v.data, v.dtype, v.dims, v.strides); }

bool overlap(ByteRange a, ByteRange b) { return !a.empty() && !b.empty() && a.begin < b.end && b.begin < a.end; }

TEST(BufferOverlaps, AdjacentAndEmptyBuffersDoNotOverlap) {
  std::vector<float> buf(64);
  BufferOverlapChecker checker;
  checker.resize_weights(1);
  checker.set_weight(0, range_of(at(buf, 8, {4})));
  std::vector<TensorView> outs = {at(buf, 0, {8}), at(buf, 12, {2, 2}), at(buf, 12, {0, 4})};
  std::vector<TensorView> ins = {at(buf, 16, {4})};
  EXPECT_FALSE(checker.find(outs, ins).has_value());
}

TEST(BufferOverlaps, NamesWhatAnOutputOverlaps) {
  std::vector<float> buf(64);
  BufferOverlapChecker checker;
  checker.resize_weights(2);
  checker.set_weight(0, range_of(at(buf, 40, {4})));
  checker.set_weight(1, range_of(at(buf, 30, {20})));  // weights overlapping each other are fine
  std::vector<TensorView> ins = {at(buf, 20, {4})};
  std::vector<TensorView> into_weight = {at(buf, 0, {4}), at(buf, 48, {4})};
  auto hit = checker.find(into_weight, ins);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->output, 1u);
  EXPECT_EQ(hit->other.role, BufferRole::weight);
  EXPECT_EQ(hit->other.index, 1u);
  std::vector<TensorView> into_input = {at(buf, 22, {4})};
  hit = checker.find(into_input, ins);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->other.role, BufferRole::input);
  std::vector<TensorView> twice = {at(buf, 0, {4}), at(buf, 3, {4})};
  hit = checker.find(twice, {});
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->output, 1u);  // the higher index, as in "output 1 overlaps output 0"
  EXPECT_EQ(hit->other.role, BufferRole::output);
  EXPECT_EQ(hit->other.index, 0u);
}

TEST(BufferOverlaps, StridedViewsSpanFirstToLastElementAndRebindsMoveWeights) {
  std::vector<float> buf(64);
  BufferOverlapChecker checker;
  checker.resize_weights(1);
  checker.set_weight(0, range_of(at(buf, 0, {2, 2}, {10, 1})));  // elements 0, 1, 10, 11
  std::vector<TensorView> between = {at(buf, 4, {2})};
  EXPECT_TRUE(checker.find(between, {}).has_value());  // inside the span, between the rows
  checker.set_weight(0, range_of(at(buf, 32, {4})));
  EXPECT_FALSE(checker.find(between, {}).has_value());
}

TEST(BufferOverlaps, AgreesWithEveryPairOnRandomLayouts) {
  std::mt19937 rng(7);
  std::vector<float> buf(512);
  auto random_view = [&] {
    std::uniform_int_distribution<int> offset(0, 400), len(0, 24);
    return at(buf, static_cast<size_t>(offset(rng)), {len(rng)});
  };
  int found = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::uniform_int_distribution<int> count(0, 6);
    std::vector<TensorView> outs(count(rng)), ins(count(rng)), weights(count(rng) * 3);
    for (auto* group : {&outs, &ins, &weights})
      for (TensorView& v : *group) v = random_view();
    BufferOverlapChecker checker;
    checker.resize_weights(weights.size());
    for (size_t i = 0; i < weights.size(); ++i) checker.set_weight(i, range_of(weights[i]));
    bool expected = false;
    for (size_t k = 0; k < outs.size(); ++k) {
      for (size_t j = 0; j < k; ++j) expected |= overlap(range_of(outs[k]), range_of(outs[j]));
      for (const TensorView& v : ins) expected |= overlap(range_of(outs[k]), range_of(v));
      for (const TensorView& v : weights) expected |= overlap(range_of(outs[k]), range_of(v));
    }
    auto hit = checker.find(outs, ins);
    ASSERT_EQ(hit.has_value(), expected) << "trial " << trial;
    if (!hit) continue;
    ++found;
    const std::vector<TensorView>& others = hit->other.role == BufferRole::output ? outs
                                            : hit->other.role == BufferRole::input ? ins
                                                                                    : weights;
    EXPECT_TRUE(overlap(range_of(outs[hit->output]), range_of(others[hit->other.index]))) << "trial " << trial;
  }
  EXPECT_GT(found, 200);  // the layouts exercised both answers
}

}  // namespace
}  // namespace kiln
