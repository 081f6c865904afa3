// softmax, log_softmax, layer_norm and batch_norm against naive double
// references: every floating dtype, several axes (negative ones), strided
// inputs, optional weight/bias left out, ranks 2 to 4, a threaded size, a
// stability case and inference errors.
#include "math_test_util.h"

namespace kiln::test {
namespace {

const DType kFloats[] = {DType::f32, DType::f16, DType::bf16, DType::f64};

// Reference softmax (or log_softmax) of x along `axis` at `idx`.
double ref_softmax(const HostTensor& x, int64_t axis, const Dims& idx, bool log) {
  Dims j = idx;
  double max = -INFINITY;
  for (j[axis] = 0; j[axis] < x.type.dims[axis]; ++j[axis]) max = std::max(max, x.at(j));
  double sum = 0;
  for (j[axis] = 0; j[axis] < x.type.dims[axis]; ++j[axis]) sum += std::exp(x.at(j) - max);
  double v = x.at(idx) - max;
  return log ? v - std::log(sum) : std::exp(v) / sum;
}

TEST(Softmax, EveryDTypeAxisAndLayout) {
  std::mt19937 rng(31);
  for (const char* op : {"softmax", "log_softmax"})
    for (DType d : kFloats)
      for (bool strided : {false, true}) {
        HostTensor x = random_tensor(d, {3, 5, 7}, rng, strided);
        for (int64_t dim : {0, 1, -1, -2}) {
          Attrs attrs;
          attrs.set("dim", dim);
          HostTensor out = run_op(op, {&x}, attrs)[0];
          ASSERT_EQ(out.type, TensorType(d, {3, 5, 7}));
          int64_t axis = dim < 0 ? dim + 3 : dim;
          bool log = std::string(op) == "log_softmax";
          expect_tensor(out, [&](const Dims& i) { return ref_softmax(x, axis, i, log); },
                        std::string(op) + " " + std::string(dtype_name(d)) + " dim " + std::to_string(dim),
                        log ? 2.0 : 1.0);
        }
      }
}

TEST(Softmax, StableForLargeInputsAndThreaded) {
  HostTensor x = alloc_tensor(TensorType(DType::f32, {2, 3}));
  double v[2][3] = {{1000, 1001, 1002}, {-1000, -1000, -1000}};
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) x.set({i, j}, v[i][j]);
  HostTensor out = run_op("softmax", {&x})[0];
  expect_tensor(out, [&](const Dims& i) { return ref_softmax(x, 1, i, false); }, "large softmax");
  std::mt19937 rng(32);
  HostTensor big = random_tensor(DType::f32, {45, 31, 27}, rng, true);  // 37665 elements
  Attrs attrs;
  attrs.set("dim", int64_t{1});
  HostTensor bo = run_op("log_softmax", {&big}, attrs)[0];
  expect_tensor(bo, [&](const Dims& i) { return ref_softmax(big, 1, i, true); }, "threaded log_softmax", 2.0);
}

// Reference layer norm over the last k dims, with optional weight/bias.
double ref_layer_norm(const HostTensor& x, int64_t k, const Dims& idx, const HostTensor* w, const HostTensor* b,
                      double eps) {
  size_t r = x.type.rank(), lead = r - static_cast<size_t>(k);
  Dims inner(x.type.dims.begin() + lead, x.type.dims.end());
  double sum = 0, sq = 0, n = static_cast<double>(numel(inner));
  auto full = [&](const Dims& in) {
    Dims j(idx.begin(), idx.begin() + lead);
    j.insert(j.end(), in.begin(), in.end());
    return j;
  };
  for_each_index(inner, [&](const Dims& in) { sum += x.at(full(in)); });
  double mean = sum / n;
  for_each_index(inner, [&](const Dims& in) { sq += (x.at(full(in)) - mean) * (x.at(full(in)) - mean); });
  Dims own(idx.begin() + lead, idx.end());
  double y = (x.at(idx) - mean) / std::sqrt(sq / n + eps);
  if (w) y *= w->at(own);
  if (b) y += b->at(own);
  return y;
}

TEST(LayerNorm, DTypesRanksAndOptionalParams) {
  std::mt19937 rng(33);
  for (DType d : kFloats)
    for (int64_t k : {1, 2})
      for (int params : {0, 1, 2})
        for (bool strided : {false, true}) {
          HostTensor x = random_tensor(d, {3, 5, 7}, rng, strided);
          Dims pd = k == 1 ? Dims{7} : Dims{5, 7};
          HostTensor w = random_tensor(DType::f32, pd, rng, strided), b = random_tensor(d, pd, rng);
          std::vector<HostTensor*> ins = {&x};
          if (params >= 1) ins.push_back(&w);
          if (params >= 2) ins.push_back(&b);
          Attrs attrs;
          attrs.set("normalized_rank", k);
          attrs.set("eps", 1e-3);
          HostTensor out = run_op("layer_norm", ins, attrs)[0];
          ASSERT_EQ(out.type, TensorType(d, {3, 5, 7}));
          expect_tensor(out, [&](const Dims& i) {
            return ref_layer_norm(x, k, i, params >= 1 ? &w : nullptr, params >= 2 ? &b : nullptr, 1e-3);
          }, "layer_norm " + std::string(dtype_name(d)) + " k " + std::to_string(k) + " params " + std::to_string(params),
                        4.0);
        }
}

TEST(BatchNorm, RanksDTypesAndOptionalParams) {
  std::mt19937 rng(34);
  for (const Dims& shape : {Dims{4, 5}, Dims{2, 5, 7}, Dims{2, 5, 3, 3}})
    for (DType d : kFloats)
      for (int params : {0, 1, 2})
        for (bool strided : {false, true}) {
          HostTensor x = random_tensor(d, shape, rng, strided);
          HostTensor mean = random_tensor(DType::f32, {5}, rng), var = random_tensor(DType::f32, {5}, rng);
          for (int64_t c = 0; c < 5; ++c) var.set({c}, std::fabs(var.at({c})));
          HostTensor w = random_tensor(d, {5}, rng, true), b = random_tensor(DType::f64, {5}, rng);
          std::vector<HostTensor*> ins = {&x, &mean, &var};
          if (params >= 1) ins.push_back(&w);
          if (params >= 2) ins.push_back(&b);
          Attrs attrs;
          attrs.set("eps", 0.01);
          HostTensor out = run_op("batch_norm", ins, attrs)[0];
          ASSERT_EQ(out.type, TensorType(d, shape));
          expect_tensor(out, [&](const Dims& i) {
            Dims c = {i[1]};
            double y = (x.at(i) - mean.at(c)) / std::sqrt(var.at(c) + 0.01);
            if (params >= 1) y *= w.at(c);
            if (params >= 2) y += b.at(c);
            return y;
          }, "batch_norm " + std::string(dtype_name(d)) + " rank " + std::to_string(shape.size()), 4.0);
        }
}

TEST(BatchNorm, ThreadedSize) {
  std::mt19937 rng(35);
  HostTensor x = random_tensor(DType::f32, {3, 7, 41, 43}, rng, true);  // 37023 elements
  HostTensor mean = random_tensor(DType::f32, {7}, rng), var = random_tensor(DType::f32, {7}, rng);
  for (int64_t c = 0; c < 7; ++c) var.set({c}, std::fabs(var.at({c})));
  HostTensor out = run_op("batch_norm", {&x, &mean, &var})[0];
  expect_tensor(out, [&](const Dims& i) {
    return (x.at(i) - mean.at({i[1]})) / std::sqrt(var.at({i[1]}) + 1e-5);
  }, "threaded batch_norm", 4.0);
}

TEST(NormInfer, RejectsBadInputs) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {2, 5, 7}));
  Value* v1 = g.add_input("v1", TensorType(DType::f32, {5}));
  Value* v7 = g.add_input("v7", TensorType(DType::f32, {7}));
  Value* r1 = g.add_input("r1", TensorType(DType::f32, {5}));
  Value* xi = g.add_input("xi", TensorType(DType::i64, {2, 5, 7}));
  Value* flat = g.add_input("flat", TensorType(DType::f32, {5}));
  Attrs dim3;
  dim3.set("dim", int64_t{3});
  expect_error([&] { g.add_node(get_op("softmax"), {x}, dim3, "sm"); },
               {"node 'sm' (softmax)", "axis 3 is out of range for rank 3"});
  expect_error([&] { g.add_node(get_op("log_softmax"), {xi}, {}, "ls"); }, {"input x must be floating-point, got i64"});
  expect_error([&] { g.add_node(get_op("layer_norm"), {x, v1}, {}, "ln"); },
               {"node 'ln' (layer_norm)", "weight must have dims [7]", "got [5]"});
  Attrs rank4;
  rank4.set("normalized_rank", int64_t{4});
  expect_error([&] { g.add_node(get_op("layer_norm"), {x}, rank4, "ln4"); }, {"normalized_rank 4 must be in [1, 3]"});
  expect_error([&] { g.add_node(get_op("batch_norm"), {x, v7, v1}, {}, "bn"); },
               {"node 'bn' (batch_norm)", "running_mean must have dims [5]", "got [7]"});
  expect_error([&] { g.add_node(get_op("batch_norm"), {flat, r1, r1}, {}, "bn1"); }, {"needs rank >= 2"});
  expect_error([&] { g.add_node(get_op("batch_norm"), {x, r1}, {}, "bn2"); }, {"expects 3 to 5 inputs, got 2"});
}

}  // namespace
}  // namespace kiln::test
