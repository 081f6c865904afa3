// Reductions (sum, mean, amax, amin, var, argmax, argmin) against a naive
// double reference that buckets input elements by output index: every dtype
// each op claims, several axis sets (negative ones included), keepdim on and
// off, strided inputs, a threaded size, NaN rules and inference errors; sums
// over outer axes give exactly the sums over the same axes laid out innermost.
#include <algorithm>
#include <cstring>

#include "math_test_util.h"

namespace kiln::test {
namespace {

// Values of `x` grouped by output element (row-major over the reduced axes),
// keyed by the flattened output index; `axes` normalized.
std::vector<std::vector<double>> buckets(const HostTensor& x, const std::vector<int64_t>& axes) {
  Dims kept;
  for (size_t i = 0; i < x.type.rank(); ++i)
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) == axes.end()) kept.push_back(x.type.dims[i]);
  std::vector<std::vector<double>> out(static_cast<size_t>(numel(kept)));
  for_each_index(x.type.dims, [&](const Dims& idx) {
    int64_t key = 0;
    for (size_t i = 0; i < idx.size(); ++i)
      if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) == axes.end()) key = key * x.type.dims[i] + idx[i];
    out[key].push_back(x.at(idx));
  });
  return out;
}

double ref_reduce(const std::string& op, const std::vector<double>& v, double correction) {
  double sum = 0;
  for (double x : v) sum += x;
  if (op == "sum") return sum;
  if (op == "mean") return sum / v.size();
  if (op == "var") {
    double m = sum / v.size(), sq = 0;
    for (double x : v) sq += (x - m) * (x - m);
    return sq / std::max(0.0, v.size() - correction);
  }
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (std::isnan(v[best])) break;
    bool better = std::isnan(v[i]) || ((op == "amax" || op == "argmax") ? v[i] > v[best] : v[i] < v[best]);
    if (better) best = i;
  }
  if (op == "argmax" || op == "argmin") return static_cast<double>(best);
  return v[best];
}

std::vector<DType> dtypes_of(const std::string& op) {
  if (op == "mean" || op == "var") return {DType::f32, DType::f16, DType::bf16, DType::f64};
  return std::vector<DType>(std::begin(kAllDTypes), std::end(kAllDTypes));
}

// Runs `op` on x and compares with the reference, output flattened row-major.
void check_reduction(const std::string& op, HostTensor& x, Attrs attrs, const std::vector<int64_t>& axes,
                     const Dims& want_dims, double correction = 1.0) {
  TensorType out_type;
  HostTensor out = run_op(op, {&x}, attrs, &out_type)[0];
  std::string what = op + " " + std::string(dtype_name(x.type.dtype)) + " axes [" + dims_to_string(axes) + "] -> [" +
                     dims_to_string(want_dims) + "]";
  ASSERT_EQ(out.type.dims, want_dims) << what;
  DType want_dtype = (op == "argmax" || op == "argmin" || (op == "sum" && !is_floating(x.type.dtype)))
                         ? DType::i64
                         : x.type.dtype;
  ASSERT_EQ(out.type.dtype, want_dtype) << what;
  std::vector<std::vector<double>> groups = buckets(x, axes);
  int64_t k = 0;
  double scale = op == "var" ? 4.0 : 1.0;  // var rounds its inputs' squares too
  expect_tensor(out, [&](const Dims&) { return ref_reduce(op, groups[k++], correction); }, what, scale);
}

struct AxisCase {
  std::vector<int64_t> dims;  // the attribute
  std::vector<int64_t> axes;  // normalized, for rank 3
};

TEST(Reduction, EveryOpDTypeAxesKeepdimAndLayout) {
  std::mt19937 rng(11);
  const Dims shape = {3, 5, 7};
  const std::vector<AxisCase> cases = {{{}, {0, 1, 2}}, {{1}, {1}}, {{-1}, {2}}, {{0, 2}, {0, 2}},
                                       {{-3, -2}, {0, 1}}, {{2, 0, 1}, {0, 1, 2}}};
  for (const char* op : {"sum", "mean", "amax", "amin", "var"})
    for (DType d : dtypes_of(op))
      for (bool strided : {false, true}) {
        Fill fill = std::string(op) == "amax" || std::string(op) == "amin" ? Fill::small_ints : Fill::continuous;
        HostTensor x = random_tensor(d, shape, rng, strided, fill);
        for (const AxisCase& c : cases)
          for (bool keepdim : {false, true}) {
            Dims want;
            for (int64_t i = 0; i < 3; ++i) {
              bool reduced = std::find(c.axes.begin(), c.axes.end(), i) != c.axes.end();
              if (!reduced || keepdim) want.push_back(reduced ? 1 : shape[i]);
            }
            Attrs attrs;
            attrs.set("dims", c.dims);
            attrs.set("keepdim", keepdim);
            check_reduction(op, x, attrs, c.axes, want);
          }
      }
}

TEST(Reduction, VarCorrection) {
  std::mt19937 rng(12);
  HostTensor x = random_tensor(DType::f64, {4, 6}, rng, true);
  for (double correction : {0.0, 1.0, 2.5}) {
    Attrs attrs;
    attrs.set("dims", std::vector<int64_t>{-1});
    attrs.set("correction", correction);
    check_reduction("var", x, attrs, {1}, {4}, correction);
  }
}

TEST(Reduction, ArgReductionsOverOneAxisOrAll) {
  std::mt19937 rng(13);
  const Dims shape = {3, 5, 7};
  for (const char* op : {"argmax", "argmin"})
    for (DType d : kAllDTypes)
      for (bool strided : {false, true}) {
        HostTensor x = random_tensor(d, shape, rng, strided, Fill::small_ints);  // many ties
        for (int64_t dim : {0, 1, -1, -3})
          for (bool keepdim : {false, true}) {
            int64_t axis = dim < 0 ? dim + 3 : dim;
            Dims want = shape;
            if (keepdim)
              want[axis] = 1;
            else
              want.erase(want.begin() + axis);
            Attrs attrs;
            attrs.set("dim", dim);
            attrs.set("keepdim", keepdim);
            check_reduction(op, x, attrs, {axis}, want);
          }
        for (bool keepdim : {false, true}) {
          Attrs attrs;
          attrs.set("flatten", true);
          attrs.set("keepdim", keepdim);
          check_reduction(op, x, attrs, {0, 1, 2}, keepdim ? Dims{1, 1, 1} : Dims{});
        }
      }
}

TEST(Reduction, NaNRules) {
  HostTensor x = alloc_tensor(TensorType(DType::f32, {2, 4}));
  double rows[2][4] = {{1, NAN, 5, NAN}, {3, 7, 7, -1}};
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 4; ++j) x.set({i, j}, rows[i][j]);
  Attrs axis1;
  axis1.set("dims", std::vector<int64_t>{1});
  HostTensor mx = run_op("amax", {&x}, axis1)[0];
  EXPECT_TRUE(std::isnan(mx.at({0})));
  EXPECT_EQ(mx.at({1}), 7);
  HostTensor mn = run_op("amin", {&x}, axis1)[0];
  EXPECT_TRUE(std::isnan(mn.at({0})));
  EXPECT_EQ(mn.at({1}), -1);
  Attrs dim1;
  dim1.set("dim", int64_t{1});
  HostTensor am = run_op("argmax", {&x}, dim1)[0];
  EXPECT_EQ(am.at({0}), 1);  // the first NaN
  EXPECT_EQ(am.at({1}), 1);  // the first of two maxima
  HostTensor an = run_op("argmin", {&x}, dim1)[0];
  EXPECT_EQ(an.at({0}), 1);
  EXPECT_EQ(an.at({1}), 3);
}

TEST(Reduction, ThreadedSizes) {
  std::mt19937 rng(14);
  HostTensor x = random_tensor(DType::f32, {37, 41, 29}, rng, true);  // 43993 elements
  for (const char* op : {"sum", "var", "argmax"}) {
    Attrs attrs;
    if (std::string(op) == "argmax")
      attrs.set("dim", int64_t{1});
    else
      attrs.set("dims", std::vector<int64_t>{1});
    check_reduction(op, x, attrs, {1}, {37, 29});
  }
  Attrs all;
  check_reduction("mean", x, all, {0, 1, 2}, {});
}

// The same values laid out with the reduced axes innermost: the reduction then walks each output's
// elements in memory order, the other path of the kernel, in the same order per output.
HostTensor reduced_axes_last(const HostTensor& x, const std::vector<int64_t>& perm) {
  Dims dims;
  for (int64_t p : perm) dims.push_back(x.type.dims[static_cast<size_t>(p)]);
  HostTensor t = alloc_tensor(TensorType(x.type.dtype, dims));
  for_each_index(x.type.dims, [&](const Dims& idx) {
    Dims moved;
    for (int64_t p : perm) moved.push_back(idx[static_cast<size_t>(p)]);
    t.set(moved, x.at(idx));
  });
  return t;
}

TEST(Reduction, OuterAxesSumExactlyAsInnerAxes) {
  std::mt19937 rng(15);
  struct Case {
    Dims shape;
    std::vector<int64_t> axes, perm;  // perm: kept axes first, then the reduced ones
  };
  const std::vector<Case> cases = {
      {{64, 3, 40, 40}, {0}, {1, 2, 3, 0}},  // over the batch, threaded (307200 elements)
      {{4, 50, 96}, {1}, {0, 2, 1}},         // over [B, T, C]'s tokens
      {{6, 5, 7, 9}, {0, 2}, {1, 3, 0, 2}},  // two reduced axes with a kept one between
  };
  for (const char* op : {"sum", "mean"})
    for (DType d : {DType::f32, DType::f16, DType::i32})
      for (const Case& c : cases) {
        if (std::string(op) == "mean" && d == DType::i32) continue;
        HostTensor x = random_tensor(d, c.shape, rng);
        HostTensor xt = reduced_axes_last(x, c.perm);
        std::vector<int64_t> inner;
        for (size_t k = c.perm.size() - c.axes.size(); k < c.perm.size(); ++k) inner.push_back(static_cast<int64_t>(k));
        Attrs outer_attrs, inner_attrs;
        outer_attrs.set("dims", c.axes);
        inner_attrs.set("dims", inner);
        HostTensor outer = run_op(op, {&x}, outer_attrs)[0];
        HostTensor last = run_op(op, {&xt}, inner_attrs)[0];
        ASSERT_EQ(outer.type, last.type);
        ASSERT_EQ(0, std::memcmp(outer.data(), last.data(), static_cast<size_t>(outer.type.storage_bytes())))
            << op << " " << dtype_name(d) << " over [" << dims_to_string(c.axes) << "] of [" << dims_to_string(c.shape)
            << "]";
      }
}

TEST(Reduction, EmptyAndRankZero) {
  HostTensor e = alloc_tensor(TensorType(DType::f32, {3, 0}));
  Attrs axis1;
  axis1.set("dims", std::vector<int64_t>{1});
  HostTensor s = run_op("sum", {&e}, axis1)[0];
  ASSERT_EQ(s.type.dims, Dims{3});
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(s.at({i}), 0);
  HostTensor m = run_op("mean", {&e}, axis1)[0];
  EXPECT_TRUE(std::isnan(m.at({0})));
  HostTensor z = alloc_tensor(TensorType(DType::i32, {}));
  z.set({}, 5);
  HostTensor zs = run_op("sum", {&z})[0];
  EXPECT_EQ(zs.type, TensorType(DType::i64, {}));
  EXPECT_EQ(zs.at({}), 5);
}

TEST(ReductionInfer, RejectsBadAxesAndDTypes) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {3, 0, 7}));
  Value* i = g.add_input("i", TensorType(DType::i32, {3, 5}));
  auto dims = [](std::vector<int64_t> d) {
    Attrs a;
    a.set("dims", d);
    return a;
  };
  expect_error([&] { g.add_node(get_op("sum"), {x}, dims({3}), "s"); },
               {"node 's' (sum)", "axis 3 is out of range for rank 3"});
  expect_error([&] { g.add_node(get_op("sum"), {x}, dims({-4}), "s2"); }, {"axis -4 is out of range"});
  expect_error([&] { g.add_node(get_op("sum"), {x}, dims({1, -2}), "s3"); }, {"repeated axis"});
  expect_error([&] { g.add_node(get_op("mean"), {i}, {}, "m"); }, {"mean needs a floating-point input, got i32"});
  expect_error([&] { g.add_node(get_op("var"), {i}, {}, "v"); }, {"var needs a floating-point input"});
  expect_error([&] { g.add_node(get_op("amax"), {x}, dims({1}), "a"); }, {"amax of an empty axis 1"});
  Attrs d5;
  d5.set("dim", int64_t{5});
  expect_error([&] { g.add_node(get_op("argmax"), {i}, d5, "am"); }, {"node 'am' (argmax)", "axis 5 is out of range"});
  Attrs bad;
  bad.set("dims", int64_t{1});
  expect_error([&] { g.add_node(get_op("sum"), {i}, bad, "b"); }, {"attribute 'dims' should be"});
}

}  // namespace
}  // namespace kiln::test
