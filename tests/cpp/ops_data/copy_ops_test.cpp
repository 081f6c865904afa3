// Copy ops (contiguous, concat, constant_pad) on every dtype and on strided
// inputs, against naive multi-index references; bad attributes and inputs.
#include "data_test_util.h"

namespace kiln::test {
namespace {

TEST(Contiguous, CopiesStridedInputsOfEveryDtype) {
  for (DType dtype : kAllDTypes) {
    Owned x = make_strided(dtype, {3, 5, 2}, {2, 0, 1}, 7);
    Graph g;
    Node* n = add_op(g, "contiguous", {x.view});
    EXPECT_TRUE(n->outputs[0]->type.is_contiguous());
    std::vector<Owned> out = run_node(n, {x.view});
    for_each_index({3, 5, 2}, [&](const Dims& i) {
      EXPECT_EQ(get(out[0].view, i), get(x.view, i)) << dtype_name(dtype);
    });
  }
}

TEST(Contiguous, LargeThreadedAndBroadcastInputs) {
  // Large enough to split across the pool; an expanded (stride 0) axis too.
  Owned x = make_strided(DType::f32, {70, 33, 41}, {1, 2, 0}, 3);
  x.view.strides[1] = 0;  // broadcast along axis 1
  Graph g;
  Node* n = add_op(g, "contiguous", {x.view});
  std::vector<Owned> out = run_node(n, {x.view});
  int64_t mismatches = 0;
  for_each_index(x.view.dims, [&](const Dims& i) { mismatches += get(out[0].view, i) != get(x.view, i); });
  EXPECT_EQ(mismatches, 0);
  // Contiguous input: a straight move; rank 0 too.
  Owned c = make_tensor(DType::i16, {200001});
  Graph g2;
  std::vector<Owned> oc = run_node(add_op(g2, "contiguous", {c.view}), {c.view});
  EXPECT_EQ(std::memcmp(oc[0].view.data, c.view.data, 200001 * 2), 0);
  Owned s = make_tensor(DType::f64, {});
  Graph g3;
  EXPECT_EQ(get(run_node(add_op(g3, "contiguous", {s.view}), {s.view})[0].view, {}), get(s.view, {}));
}

TEST(Concat, StridedInputsNegativeDimSeveralDtypes) {
  for (DType dtype : {DType::f32, DType::bf16, DType::i64, DType::boolean, DType::i8}) {
    Owned a = make_strided(dtype, {2, 3, 4}, {2, 1, 0}, 11);
    Owned b = make_tensor(dtype, {2, 1, 4}, 12);
    Owned c = make_strided(dtype, {2, 5, 4}, {0, 2, 1}, 13);
    Owned e = make_tensor(dtype, {2, 0, 4}, 14);
    Graph g;
    Node* n = add_op(g, "concat", {a.view, e.view, b.view, c.view}, attrs_of({{"dim", int64_t{-2}}}), "cat");
    ASSERT_EQ(n->outputs[0]->type.dims, (Dims{2, 9, 4}));
    std::vector<Owned> out = run_node(n, {a.view, e.view, b.view, c.view});
    for_each_index({2, 9, 4}, [&](const Dims& i) {
      double want = i[1] < 3   ? get(a.view, i)
                    : i[1] < 4 ? get(b.view, {i[0], 0, i[2]})
                               : get(c.view, {i[0], i[1] - 4, i[2]});
      EXPECT_EQ(get(out[0].view, i), want) << dtype_name(dtype);
    });
  }
}

TEST(Concat, SkipsLegacyEmptyInputsAndDim0) {
  Owned a = make_tensor(DType::f16, {3, 2}, 1);
  Owned empty = make_tensor(DType::f16, {0}, 2);
  Owned b = make_strided(DType::f16, {1, 2}, {1, 0}, 3);
  Graph g;
  Node* n = add_op(g, "concat", {empty.view, a.view, b.view});
  ASSERT_EQ(n->outputs[0]->type.dims, (Dims{4, 2}));
  std::vector<Owned> out = run_node(n, {empty.view, a.view, b.view});
  for_each_index({4, 2}, [&](const Dims& i) {
    EXPECT_EQ(get(out[0].view, i), i[0] < 3 ? get(a.view, i) : get(b.view, {0, i[1]}));
  });
}

TEST(Concat, Errors) {
  Owned a = make_tensor(DType::f32, {2, 3});
  Owned b = make_tensor(DType::f32, {3, 3});
  Owned c = make_tensor(DType::i32, {2, 3});
  Owned d = make_tensor(DType::f32, {2, 3, 1});
  Graph g;
  expect_error([&] { add_op(g, "concat", {a.view, b.view}, attrs_of({{"dim", int64_t{1}}}), "k"); },
               {"node 'k'", "input 1", "sizes differ in dim 0"});
  expect_error([&] { add_op(g, "concat", {a.view, c.view}); }, {"input 1 is i32", "f32"});
  expect_error([&] { add_op(g, "concat", {a.view, d.view}); }, {"ranks differ"});
  expect_error([&] { add_op(g, "concat", {a.view}, attrs_of({{"dim", int64_t{2}}})); }, {"dim 2 is out of range"});
  expect_error([&] { g.add_node(get_op("concat"), {}); }, {"at least one input"});
}

// Naive constant_pad: output index -> input index per dim, or the fill value.
void check_pad(const TensorView& x, const TensorView& out, const std::vector<int64_t>& pad, double value) {
  const size_t rank = x.dims.size();
  for_each_index(out.dims, [&](const Dims& i) {
    Dims src = i;
    bool inside = true;
    for (size_t k = 0; k < pad.size() / 2; ++k) {
      const size_t d = rank - 1 - k;
      src[d] = i[d] - pad[2 * k];
      inside = inside && src[d] >= 0 && src[d] < x.dims[d];
    }
    EXPECT_EQ(get(out, i), inside ? get(x, src) : value) << dims_to_string(i);
  });
}

TEST(ConstantPad, PadsAndCropsLikeTorch) {
  struct Case {
    DType dtype;
    std::vector<int64_t> pad;
    double value, stored;  // `value` as the attribute, `stored` as it reads back in dtype
  };
  const std::vector<Case> cases = {
      {DType::f32, {1, 2}, 1.5, 1.5},
      {DType::f16, {0, 0, 2, 1, 1, 0}, -0.25, -0.25},
      {DType::i32, {-1, 2, 1, -2}, 7.9, 7},  // integers truncate
      {DType::u8, {3, -2}, 5, 5},
      {DType::boolean, {1, 1, 1, 1}, 2.0, 1},
      {DType::bf16, {-2, -1, 0, 3}, 0.0, 0.0},
      {DType::i64, {-7, 3}, -3, -3},  // crops all of the last dim: only fill remains
      {DType::i16, {0, 0, -4, 1}, 4, 4},  // an empty output
  };
  for (const Case& c : cases) {
    Owned x = make_strided(c.dtype, {2, 3, 5}, {1, 2, 0}, 5);
    Graph g;
    Node* n = add_op(g, "constant_pad", {x.view}, attrs_of({{"pad", c.pad}, {"value", c.value}}));
    std::vector<Owned> out = run_node(n, {x.view});
    SCOPED_TRACE(dtype_name(c.dtype));
    check_pad(x.view, out[0].view, c.pad, c.stored);
  }
}

TEST(ConstantPad, Errors) {
  Owned x = make_tensor(DType::f32, {2, 3});
  Graph g;
  expect_error([&] { add_op(g, "constant_pad", {x.view}, attrs_of({{"pad", std::vector<int64_t>{1}}}), "p"); },
               {"node 'p'", "even length"});
  const std::vector<int64_t> too_many = {1, 1, 1, 1, 1, 1};
  expect_error([&] { add_op(g, "constant_pad", {x.view}, attrs_of({{"pad", too_many}})); },
               {"pads 3 dims", "has only 2"});
  expect_error([&] { add_op(g, "constant_pad", {x.view}, attrs_of({{"pad", std::vector<int64_t>{-2, -2}}})); },
               {"negative"});
  Owned b = make_tensor(DType::u8, {2});
  const std::vector<int64_t> pad = {1, 1};
  expect_error([&] { add_op(g, "constant_pad", {b.view}, attrs_of({{"pad", pad}, {"value", -1.0}})); },
               {"attribute 'value'", "cannot be converted to u8"});
}

}  // namespace
}  // namespace kiln::test
