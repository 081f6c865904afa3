// Every elementwise op of elementwise.def, in every dtype its kind admits,
// against a naive double reference: same shapes, broadcasting ([3,1,7] with
// [5,1]) and permuted padded strided inputs, plus one threaded size, the
// apply_elementwise API and shape-inference errors.
#include <map>

#include "backends/cpu/elementwise_eval.h"
#include "math_test_util.h"

namespace kiln::test {
namespace {

using RefFn = std::function<double(double, double, double)>;

double ref_max(double x, double y) { return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y); }
double ref_min(double x, double y) { return std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y); }

// Independent definitions of each op in double.
const std::map<std::string, RefFn>& references() {
  static const std::map<std::string, RefFn> refs = {
      {"add", [](double x, double y, double) { return x + y; }},
      {"sub", [](double x, double y, double) { return x - y; }},
      {"mul", [](double x, double y, double) { return x * y; }},
      {"div", [](double x, double y, double) { return x / y; }},
      {"pow", [](double x, double y, double) { return std::pow(x, y); }},
      {"fmod", [](double x, double y, double) { return y == 0 ? 0.0 : std::fmod(x, y); }},  // integer 0: 0 (no trap)
      {"maximum", [](double x, double y, double) { return ref_max(x, y); }},
      {"minimum", [](double x, double y, double) { return ref_min(x, y); }},
      {"neg", [](double x, double, double) { return -x; }},
      {"abs", [](double x, double, double) { return std::fabs(x); }},
      {"exp", [](double x, double, double) { return std::exp(x); }},
      {"log", [](double x, double, double) { return std::log(x); }},
      {"sqrt", [](double x, double, double) { return std::sqrt(x); }},
      {"rsqrt", [](double x, double, double) { return 1.0 / std::sqrt(x); }},
      {"reciprocal", [](double x, double, double) { return 1.0 / x; }},
      {"sin", [](double x, double, double) { return std::sin(x); }},
      {"cos", [](double x, double, double) { return std::cos(x); }},
      {"tanh", [](double x, double, double) { return std::tanh(x); }},
      {"sigmoid", [](double x, double, double) { return 1.0 / (1.0 + std::exp(-x)); }},
      {"relu", [](double x, double, double) { return x > 0 ? x : 0.0; }},
      {"gelu", [](double x, double, double) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }},
      {"gelu_tanh",
       [](double x, double, double) {
         return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
       }},
      {"silu", [](double x, double, double) { return x / (1.0 + std::exp(-x)); }},
      {"erf", [](double x, double, double) { return std::erf(x); }},
      {"clamp", [](double x, double lo, double hi) { return ref_min(ref_max(x, lo), hi); }},
      {"where", [](double c, double y, double z) { return c != 0 ? y : z; }},
      {"eq", [](double x, double y, double) { return double(x == y); }},
      {"ne", [](double x, double y, double) { return double(x != y); }},
      {"lt", [](double x, double y, double) { return double(x < y); }},
      {"le", [](double x, double y, double) { return double(x <= y); }},
      {"gt", [](double x, double y, double) { return double(x > y); }},
      {"ge", [](double x, double y, double) { return double(x >= y); }},
      {"logical_not", [](double x, double, double) { return double(x == 0); }},
      {"logical_and", [](double x, double y, double) { return double(x != 0 && y != 0); }},
      {"logical_or", [](double x, double y, double) { return double(x != 0 || y != 0); }},
  };
  return refs;
}

std::vector<DType> dtypes_of(ElementwiseKind kind) {
  if (kind == ElementwiseKind::floating) return {DType::f32, DType::f16, DType::bf16, DType::f64};
  return std::vector<DType>(std::begin(kAllDTypes), std::end(kAllDTypes));
}

// Reads `t` at output index `idx` through broadcasting (right-aligned dims).
double read_broadcast(const HostTensor& t, const Dims& idx) {
  Dims own(t.type.rank());
  size_t offset = idx.size() - own.size();
  for (size_t i = 0; i < own.size(); ++i) own[i] = t.type.dims[i] == 1 ? 0 : idx[offset + i];
  return t.at(own);
}

enum class Layout { same, broadcast, strided };

// Checks `op` with operand dtypes `dtypes` in one layout.
void check_op(const OpDef& op, const std::vector<DType>& dtypes, Layout layout, std::mt19937& rng) {
  const ElementwiseInfo& info = *op.elementwise;
  Fill fill = info.kind == ElementwiseKind::arith && is_floating(dtypes.back()) && op.name != "clamp"
                  ? Fill::continuous
              : info.kind == ElementwiseKind::floating ? Fill::continuous
                                                       : Fill::small_ints;
  std::vector<Dims> shapes;
  for (int k = 0; k < info.arity; ++k) {
    if (layout == Layout::broadcast)
      shapes.push_back(k == 0 ? Dims{3, 1, 7} : k == 1 ? Dims{5, 1} : Dims{7});
    else
      shapes.push_back({3, 5, 7});
  }
  std::vector<HostTensor> inputs;
  for (int k = 0; k < info.arity; ++k)
    inputs.push_back(random_tensor(dtypes[k], shapes[k], rng, layout == Layout::strided && k == 0, fill));
  std::vector<HostTensor*> ptrs;
  for (HostTensor& t : inputs) ptrs.push_back(&t);
  std::vector<HostTensor> out = run_op(op.name, ptrs);
  ASSERT_EQ(out[0].type.dims, (info.arity == 1 ? shapes[0] : Dims{3, 5, 7}));
  const RefFn& ref = references().at(op.name);
  std::string what = op.name + " " + std::string(dtype_name(dtypes.back())) + " layout " +
                     std::to_string(static_cast<int>(layout));
  expect_tensor(out[0], [&](const Dims& idx) {
    double v[3] = {0, 0, 0};
    for (int k = 0; k < info.arity; ++k) v[k] = read_broadcast(inputs[k], idx);
    return ref(v[0], v[1], v[2]);
  }, what);
}

TEST(Elementwise, EveryOpEveryDTypeEveryLayout) {
  std::mt19937 rng(1);
  int checked = 0;
  for (const OpDef* op : all_ops()) {
    if (!op->elementwise) continue;
    ASSERT_TRUE(references().count(op->name)) << "no reference for " << op->name;
    for (DType d : dtypes_of(op->elementwise->kind)) {
      std::vector<DType> dtypes(op->elementwise->arity, d);
      if (op->elementwise->kind == ElementwiseKind::select) dtypes[0] = DType::boolean;
      for (Layout layout : {Layout::same, Layout::broadcast, Layout::strided}) {
        check_op(*op, dtypes, layout, rng);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 300);
}

TEST(Elementwise, LogicalOpsTakeMixedDTypes) {
  std::mt19937 rng(2);
  for (const char* name : {"logical_and", "logical_or"})
    for (DType a : {DType::f32, DType::bf16, DType::i8})
      for (DType b : {DType::boolean, DType::u8, DType::f64})
        for (Layout layout : {Layout::same, Layout::broadcast, Layout::strided}) check_op(get_op(name), {a, b}, layout, rng);
}

TEST(Elementwise, NaNPropagatesThroughMaximumAndClamp) {
  HostTensor x = alloc_tensor(TensorType(DType::f32, {3})), y = alloc_tensor(TensorType(DType::f32, {3}));
  x.set({0}, NAN), x.set({1}, 1.0), x.set({2}, 2.0);
  y.set({0}, 1.0), y.set({1}, NAN), y.set({2}, -1.0);
  HostTensor m = run_op("maximum", {&x, &y})[0];
  EXPECT_TRUE(std::isnan(m.at({0})));
  EXPECT_TRUE(std::isnan(m.at({1})));
  EXPECT_EQ(m.at({2}), 2.0);
  HostTensor r = run_op("relu", {&x})[0];
  EXPECT_TRUE(std::isnan(r.at({0})));
}

TEST(Elementwise, IntegerArithmeticWrapsInStorageType) {
  HostTensor x = alloc_tensor(TensorType(DType::i8, {2})), y = alloc_tensor(TensorType(DType::i8, {2}));
  x.set({0}, 100), x.set({1}, -128);
  y.set({0}, 100), y.set({1}, 1);
  HostTensor s = run_op("add", {&x, &y})[0];
  EXPECT_EQ(s.at({0}), -56);  // 200 wraps
  HostTensor d = run_op("sub", {&x, &y})[0];
  EXPECT_EQ(d.at({1}), 127);  // -129 wraps
}

TEST(Elementwise, ThreadedSizeWithBroadcastAndStrides) {
  std::mt19937 rng(3);
  // 67 * 33 * 41 = 90651 elements, over the threading threshold.
  HostTensor a = random_tensor(DType::f32, {67, 33, 41}, rng, /*strided=*/true);
  HostTensor b = random_tensor(DType::f32, {33, 1}, rng);
  HostTensor out = run_op("mul", {&a, &b})[0];
  expect_tensor(out, [&](const Dims& i) { return a.at(i) * b.at({i[1], 0}); }, "threaded mul");
  HostTensor c = random_tensor(DType::bf16, {67, 33, 41}, rng, true);
  HostTensor g = run_op("gelu", {&c})[0];
  expect_tensor(g, [&](const Dims& i) {
    double x = c.at(i);
    return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  }, "threaded gelu bf16");
}

TEST(Elementwise, RankZeroAndEmpty) {
  HostTensor x = alloc_tensor(TensorType(DType::f64, {})), y = alloc_tensor(TensorType(DType::f64, {4}));
  x.set({}, 2.5);
  for (int64_t i = 0; i < 4; ++i) y.set({i}, static_cast<double>(i));
  HostTensor out = run_op("sub", {&x, &y})[0];
  ASSERT_EQ(out.type.dims, Dims{4});
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(out.at({i}), 2.5 - static_cast<double>(i));
  HostTensor e = alloc_tensor(TensorType(DType::f32, {0, 3}));
  EXPECT_EQ(run_op("exp", {&e})[0].type.numel(), 0);
}

TEST(ElementwiseEval, AppliesOpsOnComputeBuffers) {
  float x[4] = {1, -2, 3, 0}, y[4] = {2, 2, 2, 0}, c[4] = {1, 0, 1, 0}, out[4];
  const float* add_in[] = {x, y};
  cpu::apply_elementwise<float>(get_op("add"), add_in, out, 4);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 5.0f);
  const float* where_in[] = {c, x, y};
  cpu::apply_elementwise<float>(get_op("where"), where_in, out, 4);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 2.0f);
  cpu::apply_elementwise<float>(get_op("lt"), add_in, out, 4);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 0.0f);
  const float* not_in[] = {x};
  cpu::apply_elementwise<float>(get_op("logical_not"), not_in, out, 4);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[3], 1.0f);
  double dx[2] = {0.0, 1.0}, dout[2];
  const double* d_in[] = {dx};
  cpu::apply_elementwise<double>(get_op("exp"), d_in, dout, 2);
  EXPECT_DOUBLE_EQ(dout[1], std::exp(1.0));
  int64_t ix[2] = {-3, 4}, iout[2];
  const int64_t* i_in[] = {ix};
  cpu::apply_elementwise<int64_t>(get_op("abs"), i_in, iout, 2);
  EXPECT_EQ(iout[0], 3);
  EXPECT_EQ(cpu::elementwise_fn<int64_t>(get_op("exp")), nullptr);
  EXPECT_NE(cpu::elementwise_fn<float>(get_op("exp")), nullptr);
  expect_error([&] { cpu::apply_elementwise<int64_t>(get_op("exp"), i_in, iout, 2); }, {"exp", "int64"});
}

TEST(ElementwiseInfer, RejectsBadShapesAndDTypes) {
  Graph g;
  Value* a = g.add_input("a", TensorType(DType::f32, {3, 4}));
  Value* b = g.add_input("b", TensorType(DType::f32, {5}));
  Value* i = g.add_input("i", TensorType(DType::i32, {3, 4}));
  expect_error([&] { g.add_node(get_op("add"), {a, b}, {}, "bad_add"); },
               {"node 'bad_add' (add)", "shapes cannot broadcast", "[3,4]", "[5]"});
  expect_error([&] { g.add_node(get_op("exp"), {i}, {}, "bad_exp"); }, {"bad_exp", "floating-point", "i32"});
  expect_error([&] { g.add_node(get_op("add"), {a, i}, {}, "mixed"); }, {"mixed", "operand 1 is i32"});
  expect_error([&] { g.add_node(get_op("where"), {a, a, a}, {}, "w"); }, {"condition must be bool", "f32"});
  expect_error([&] { g.add_node(get_op("add"), {a}, {}, "one"); }, {"expects 2 inputs, got 1"});
}

}  // namespace
}  // namespace kiln::test
