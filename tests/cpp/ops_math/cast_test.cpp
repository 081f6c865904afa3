// cast between every pair of dtypes against a naive reference (truncation
// toward zero for float to integer, wrap for narrowing integers, x != 0 for
// bool, rounding for narrower floats), contiguous and strided, plus a
// threaded size and the missing-attribute error.
#include "math_test_util.h"

namespace kiln::test {
namespace {

// The torch result of casting the value `v` (exact in its source dtype) to `to`.
double ref_cast(double v, DType to) {
  if (to == DType::boolean) return v != 0 ? 1 : 0;
  if (is_floating(to)) {
    HostTensor t = alloc_tensor(TensorType(to, {}));
    t.set({}, v);  // rounds to nearest like the kernel
    return t.at({});
  }
  return wrap_integer(std::trunc(v), to);
}

TEST(Cast, EveryPairOfDTypes) {
  std::mt19937 rng(21);
  const double specials[] = {-2.75, -0.5, 0.0, 0.5, 1.0, 3.9, 100.25, 300.5, -129.0, 65504.0};
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes)
      for (bool strided : {false, true}) {
        HostTensor x = random_tensor(from, {3, 5, 7}, rng, strided);
        int64_t k = 0;
        for_each_index(x.type.dims, [&](const Dims& idx) {
          if (k < 10 && is_floating(from) && !(from == DType::f16 && specials[k] > 65504)) x.set(idx, specials[k]);
          ++k;
        });
        Attrs attrs;
        attrs.set("dtype", to);
        HostTensor out = run_op("cast", {&x}, attrs)[0];
        ASSERT_EQ(out.type, TensorType(to, {3, 5, 7}));
        // Exact: the reference rounds the same single value once.
        for_each_index(x.type.dims, [&](const Dims& idx) {
          double want = ref_cast(x.at(idx), to), got = out.at(idx);
          ASSERT_TRUE(got == want || (std::isnan(got) && std::isnan(want)))
              << dtype_name(from) << " -> " << dtype_name(to) << " at [" << dims_to_string(idx) << "]: " << x.at(idx)
              << " gave " << got << ", expected " << want;
        });
      }
}

TEST(Cast, ThreadedStridedToHalf) {
  std::mt19937 rng(22);
  HostTensor x = random_tensor(DType::f64, {61, 29, 37}, rng, true);
  Attrs attrs;
  attrs.set("dtype", DType::f16);
  HostTensor out = run_op("cast", {&x}, attrs)[0];
  expect_tensor(out, [&](const Dims& i) { return x.at(i); }, "threaded cast");
}

TEST(CastInfer, NeedsDTypeAttribute) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {2}));
  expect_error([&] { g.add_node(get_op("cast"), {x}, {}, "c"); }, {"cast", "required attribute 'dtype' is missing"});
}

TEST(TestHelpers, ComparisonsCanFail) {
  EXPECT_FALSE(close_enough(1.0001, 1.0, DType::f32));
  EXPECT_TRUE(close_enough(1.000001, 1.0, DType::f32));
  EXPECT_FALSE(close_enough(1.0, NAN, DType::f16));
  EXPECT_FALSE(close_enough(3.0, 2.0, DType::i32));
  EXPECT_TRUE(close_enough(-56.0, 200.0, DType::i8));  // wraps like int8
}

}  // namespace
}  // namespace kiln::test
