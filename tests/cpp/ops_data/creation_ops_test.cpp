// full and arange: values and lengths like torch, every dtype; bad attributes.
#include <cmath>

#include "data_test_util.h"

namespace kiln::test {
namespace {

TEST(Full, FillsEveryDtype) {
  for (DType dtype : kAllDTypes) {
    const double value = dtype == DType::boolean ? 1.0 : dtype == DType::u8 ? 200.0 : -2.5;
    double want = value;
    if (dtype == DType::boolean) want = 1.0;
    else if (is_integral(dtype) && dtype != DType::u8) want = -2.0;  // truncates toward zero
    Graph g;
    Node* n = g.add_node(get_op("full"), {},
                         attrs_of({{"shape", std::vector<int64_t>{3, 1, 7}}, {"value", value}, {"dtype", dtype}}));
    ASSERT_EQ(n->outputs[0]->type, TensorType(dtype, {3, 1, 7}));
    std::vector<Owned> out = run_node(n, {});
    for_each_index({3, 1, 7}, [&](const Dims& i) { EXPECT_EQ(get(out[0].view, i), want) << dtype_name(dtype); });
  }
  // Large: threaded fill; rank 0.
  Graph g;
  Node* big = g.add_node(get_op("full"), {}, attrs_of({{"shape", std::vector<int64_t>{300007}}, {"value", 0.5}}));
  std::vector<Owned> out = run_node(big, {});
  int64_t wrong = 0;
  for (int64_t i = 0; i < 300007; ++i) wrong += out[0].view.ptr<float>()[i] != 0.5f;
  EXPECT_EQ(wrong, 0);
  Node* scalar = g.add_node(get_op("full"), {},
                            attrs_of({{"shape", std::vector<int64_t>{}}, {"value", 9.0}, {"dtype", DType::i8}}));
  EXPECT_EQ(get(run_node(scalar, {})[0].view, {}), 9.0);
}

TEST(Full, Errors) {
  Graph g;
  const std::vector<int64_t> bad = {2, -1};
  expect_error([&] { g.add_node(get_op("full"), {}, attrs_of({{"shape", bad}, {"value", 1.0}}), "f"); },
               {"node 'f'", "negative size -1"});
  expect_error([&] { g.add_node(get_op("full"), {}, attrs_of({{"shape", std::vector<int64_t>{2}}})); },
               {"required attribute 'value'"});
  const std::vector<int64_t> good = {2};
  for (auto [v, d] : std::vector<std::pair<double, DType>>{
           {256.0, DType::u8}, {-1.0, DType::u8}, {128.0, DType::i8}, {NAN, DType::i32}, {1e19, DType::i64}})
    expect_error([&] { g.add_node(get_op("full"), {}, attrs_of({{"shape", good}, {"value", v}, {"dtype", d}})); },
                 {"cannot be converted to", "overflow"});
  // In range after truncation: fine.
  EXPECT_NO_THROW(g.add_node(get_op("full"), {},
                             attrs_of({{"shape", std::vector<int64_t>{1}}, {"value", -128.9}, {"dtype", DType::i8}})));
}

TEST(Arange, LengthAndValuesLikeTorch) {
  struct Case {
    double start, end, step;
    DType dtype;
    int64_t length;  // from torch.arange
  };
  const std::vector<Case> cases = {
      {0, 10, 1, DType::i64, 10},    {0, 10, 3, DType::i32, 4},       {1, 2.5, 0.5, DType::f32, 3},
      {5, -3, -2, DType::i64, 4},    {0, 1, 0.1, DType::f64, 10},     {-1, 1, 0.25, DType::bf16, 8},
      {3, 3, 1, DType::f16, 0},      {0, 7, 2, DType::u8, 4},         {-4, 4, 3, DType::i8, 3},
      {0, 100, 1, DType::i16, 100},
  };
  for (const Case& c : cases) {
    Graph g;
    Node* n = g.add_node(get_op("arange"), {},
                         attrs_of({{"start", c.start}, {"end", c.end}, {"step", c.step}, {"dtype", c.dtype}}));
    ASSERT_EQ(n->outputs[0]->type, TensorType(c.dtype, {c.length})) << c.start << " " << c.end << " " << c.step;
    std::vector<Owned> out = run_node(n, {});
    for (int64_t i = 0; i < c.length; ++i) {
      double want = c.start + static_cast<double>(i) * c.step;
      if (is_integral(c.dtype)) want = std::trunc(want);
      if (c.dtype == DType::f32) want = static_cast<float>(want);
      EXPECT_EQ(get(out[0].view, {i}), want) << dtype_name(c.dtype) << " i=" << i;
    }
  }
  // Defaults: start 0, step 1, i64; integer attributes are accepted for floats.
  Graph g;
  Node* n = g.add_node(get_op("arange"), {}, attrs_of({{"end", int64_t{5}}}));
  EXPECT_EQ(n->outputs[0]->type, TensorType(DType::i64, {5}));
  std::vector<Owned> out = run_node(n, {});
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(out[0].view.ptr<int64_t>()[i], i);
}

TEST(Arange, Errors) {
  Graph g;
  expect_error([&] { g.add_node(get_op("arange"), {}, attrs_of({{"end", 5.0}, {"step", 0.0}}), "a"); },
               {"node 'a'", "non-zero"});
  expect_error([&] { g.add_node(get_op("arange"), {}, attrs_of({{"start", 5.0}, {"end", 0.0}})); },
               {"inconsistent with the sign of step"});
  expect_error([&] { g.add_node(get_op("arange"), {}, attrs_of({{"end", 5.0}, {"dtype", DType::boolean}})); },
               {"bool"});
  expect_error([&] { g.add_node(get_op("arange"), {}, attrs_of({{"end", INFINITY}})); }, {"finite"});
}

TEST(DataOps, AtenOverloadsMapToTheirOps) {
  const std::vector<std::pair<const char*, const char*>> map = {
      {"aten.cat.default", "concat"},           {"aten.constant_pad_nd.default", "constant_pad"},
      {"aten.gather.default", "gather"},        {"aten.index_select.default", "index_select"},
      {"aten.embedding.default", "embedding"},  {"aten.full.default", "full"},
      {"aten.arange.start_step", "arange"},     {"aten.clone.default", "contiguous"},
      {"aten._unsafe_view.default", "reshape"}, {"aten.squeeze.dims", "squeeze"}};
  for (const auto& [aten, name] : map) {
    const OpDef* op = find_op_for_aten(aten);
    ASSERT_NE(op, nullptr) << aten;
    EXPECT_EQ(op->name, name);
  }
  EXPECT_TRUE(get_op("full").has(kCreation));
  EXPECT_TRUE(get_op("arange").has(kCreation));
  EXPECT_FALSE(get_op("concat").has(kView));
}

}  // namespace
}  // namespace kiln::test
