// gather, index_select and embedding against naive references, on strided
// inputs and several dtypes; out-of-range indices fail at run time with the
// node's name.
#include <algorithm>

#include "data_test_util.h"

namespace kiln::test {
namespace {

// An index tensor with values in [0, bound), possibly strided.
Owned make_index(DType dtype, const Dims& dims, int64_t bound, uint32_t seed, bool strided = false) {
  Owned t;
  if (!strided) {
    t = make_tensor(dtype, dims, seed);
  } else if (dims.size() == 1) {  // stride 3: a column of a [n, 3] buffer
    t = make_strided(dtype, {dims[0], 1}, {0, 1}, seed);
    t.view.dims = dims;
    t.view.strides.pop_back();
  } else {
    Dims reversed = iota_dims(dims.size());
    std::reverse(reversed.begin(), reversed.end());
    t = make_strided(dtype, dims, reversed, seed);
  }
  std::mt19937 rng(seed);
  for_each_index(dims, [&](const Dims& i) { set(t.view, i, static_cast<double>(rng() % bound)); });
  return t;
}

TEST(Gather, MatchesTorchSemanticsOnStridedInputs) {
  for (DType dtype : {DType::f32, DType::f16, DType::i64, DType::u8}) {
    for (int64_t dim : {0, 1, -1}) {
      Owned x = make_strided(dtype, {4, 5}, {1, 0}, 21);
      const size_t d = static_cast<size_t>(dim < 0 ? dim + 2 : dim);
      Owned idx = make_index(dim == 1 ? DType::i32 : DType::i64, {3, 4}, x.view.dims[d], 22, dim == 0);
      Graph g;
      Node* n = add_op(g, "gather", {x.view, idx.view}, attrs_of({{"dim", dim}}));
      ASSERT_EQ(n->outputs[0]->type.dims, (Dims{3, 4}));
      std::vector<Owned> out = run_node(n, {x.view, idx.view});
      for_each_index({3, 4}, [&](const Dims& i) {
        Dims src = i;
        src[d] = static_cast<int64_t>(get(idx.view, i));
        EXPECT_EQ(get(out[0].view, i), get(x.view, src)) << dtype_name(dtype) << " dim " << dim;
      });
    }
  }
}

TEST(Gather, Errors) {
  Owned x = make_tensor(DType::f32, {4, 5});
  Owned idx = make_tensor(DType::i64, {2, 2});
  for_each_index({2, 2}, [&](const Dims& i) { set(idx.view, i, 4); });
  set(idx.view, {1, 0}, 5);
  Graph g;
  Node* n = add_op(g, "gather", {x.view, idx.view}, attrs_of({{"dim", int64_t{1}}}), "gat");
  expect_error([&] { run_node(n, {x.view, idx.view}); }, {"node 'gat'", "index 5 is out of range", "size 5"});
  set(idx.view, {1, 0}, -1);
  expect_error([&] { run_node(n, {x.view, idx.view}); }, {"node 'gat'", "index -1 is out of range"});
  Owned wide = make_tensor(DType::i64, {5, 2});
  expect_error([&] { add_op(g, "gather", {x.view, wide.view}, attrs_of({{"dim", int64_t{1}}})); },
               {"larger than x", "dim 0"});
  Owned flat = make_tensor(DType::i64, {2});
  expect_error([&] { add_op(g, "gather", {x.view, flat.view}, attrs_of({{"dim", int64_t{0}}})); }, {"rank"});
  Owned fidx = make_tensor(DType::f32, {2, 2});
  expect_error([&] { add_op(g, "gather", {x.view, fidx.view}, attrs_of({{"dim", int64_t{0}}})); },
               {"index must be i64 or i32"});
  expect_error([&] { add_op(g, "gather", {x.view, idx.view}, attrs_of({{"dim", int64_t{-3}}})); },
               {"dim -3 is out of range"});
}

TEST(IndexSelect, EveryDimWithRepeatsAndStridedIndex) {
  Owned x = make_strided(DType::bf16, {3, 4, 5}, {2, 0, 1}, 31);
  for (int64_t dim : {0, 1, 2, -2}) {
    const size_t d = static_cast<size_t>(dim < 0 ? dim + 3 : dim);
    Owned idx = make_index(dim == 2 ? DType::i32 : DType::i64, {7}, x.view.dims[d], 32, dim == 1);
    Graph g;
    Node* n = add_op(g, "index_select", {x.view, idx.view}, attrs_of({{"dim", dim}}));
    Dims want = x.view.dims;
    want[d] = 7;
    ASSERT_EQ(n->outputs[0]->type.dims, want);
    std::vector<Owned> out = run_node(n, {x.view, idx.view});
    for_each_index(want, [&](const Dims& i) {
      Dims src = i;
      src[d] = static_cast<int64_t>(get(idx.view, {i[d]}));
      EXPECT_EQ(get(out[0].view, i), get(x.view, src)) << "dim " << dim;
    });
  }
}

TEST(IndexSelect, Errors) {
  Owned x = make_tensor(DType::i8, {3, 4});
  Owned idx = make_tensor(DType::i64, {2});
  set(idx.view, {0}, 1);
  set(idx.view, {1}, 4);
  Graph g;
  Node* n = add_op(g, "index_select", {x.view, idx.view}, attrs_of({{"dim", int64_t{1}}}), "isel");
  expect_error([&] { run_node(n, {x.view, idx.view}); }, {"node 'isel'", "index 4 is out of range", "dim 1"});
  Owned idx2 = make_tensor(DType::i64, {2, 2});
  expect_error([&] { add_op(g, "index_select", {x.view, idx2.view}, attrs_of({{"dim", int64_t{0}}})); },
               {"must be 1-D"});
}

TEST(Embedding, RowsForIndicesOfSeveralIntegerDtypes) {
  for (DType idx_dtype : {DType::i64, DType::i32, DType::u8, DType::i16}) {
    Owned w = make_strided(DType::f32, {9, 6}, {1, 0}, 41);
    Owned ids = make_index(idx_dtype, {2, 3}, 9, 42, idx_dtype == DType::i32);
    Graph g;
    Node* n = add_op(g, "embedding", {w.view, ids.view});
    ASSERT_EQ(n->outputs[0]->type.dims, (Dims{2, 3, 6}));
    std::vector<Owned> out = run_node(n, {w.view, ids.view});
    for_each_index({2, 3, 6}, [&](const Dims& i) {
      EXPECT_EQ(get(out[0].view, i), get(w.view, {static_cast<int64_t>(get(ids.view, {i[0], i[1]})), i[2]}))
          << dtype_name(idx_dtype);
    });
  }
  // 0-d indices give one row.
  Owned w = make_tensor(DType::f64, {4, 3});
  Owned one = make_tensor(DType::i64, {});
  set(one.view, {}, 2);
  Graph g;
  std::vector<Owned> out = run_node(add_op(g, "embedding", {w.view, one.view}), {w.view, one.view});
  for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(get(out[0].view, {j}), get(w.view, {2, j}));
}

TEST(Embedding, Errors) {
  Owned w = make_tensor(DType::f32, {4, 3});
  Owned ids = make_tensor(DType::i32, {3});
  set(ids.view, {0}, 0);
  set(ids.view, {1}, 3);
  set(ids.view, {2}, 4);
  Graph g;
  Node* n = add_op(g, "embedding", {w.view, ids.view}, {}, "emb");
  expect_error([&] { run_node(n, {w.view, ids.view}); }, {"node 'emb'", "index 4 is out of range", "weight"});
  Owned fids = make_tensor(DType::f32, {3});
  expect_error([&] { add_op(g, "embedding", {w.view, fids.view}); }, {"integer dtype"});
  Owned w3 = make_tensor(DType::f32, {4, 3, 2});
  expect_error([&] { add_op(g, "embedding", {w3.view, ids.view}); }, {"must be 2-D"});
}

}  // namespace
}  // namespace kiln::test
