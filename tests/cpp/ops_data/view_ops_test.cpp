// View ops: the output type's dims/strides and view_offset, read back through
// input 0's buffer, against naive index mappings; bad attributes.
#include <limits>

#include "data_test_util.h"
#include "ops/view_offset.h"

namespace kiln::test {
namespace {

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

// Element `idx` of view node's output, read through its type and offset from input `x`.
double read_view(const Node* node, const TensorView& x, const Dims& idx) {
  const TensorType& t = node->outputs[0]->type;
  return get_at(x.data, x.dtype, view_offset(*node) + offset_of(t.strides, idx));
}

// Row-major flat position -> multi-index.
Dims unflatten(int64_t flat, const Dims& dims) {
  Dims idx(dims.size());
  for (size_t i = dims.size(); i-- > 0;) {
    idx[i] = flat % dims[i];
    flat /= dims[i];
  }
  return idx;
}

Node* view_node(Graph& g, const std::string& op, const TensorView& x, Attrs attrs) {
  Node* n = add_op(g, op, {x}, std::move(attrs), "v");
  EXPECT_TRUE(n->op->has(kView));
  return n;
}

TEST(Reshape, ContiguousInputsMatchRowMajorOrder) {
  Owned x = make_tensor(DType::f32, {2, 3, 4});
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{4, -1}, {24}, {1, 24, 1}, {2, 2, 3, 2}, {-1, 1, 3}}) {
    Graph g;
    Node* n = view_node(g, "reshape", x.view, attrs_of({{"shape", shape}}));
    const TensorType& t = n->outputs[0]->type;
    ASSERT_EQ(t.numel(), 24);
    EXPECT_EQ(view_offset(*n), 0);
    for (int64_t f = 0; f < 24; ++f)
      EXPECT_EQ(read_view(n, x.view, unflatten(f, t.dims)), get(x.view, unflatten(f, x.view.dims)));
  }
}

TEST(Reshape, StridedInputThatAllowsAViewKeepsItsStrides) {
  // A transposed [3, 4] (storage order 1, 0) split as [3, 2, 2]: only the last axis splits.
  Owned x = make_strided(DType::i32, {3, 4}, {1, 0});
  Graph g;
  Node* n = view_node(g, "reshape", x.view, attrs_of({{"shape", std::vector<int64_t>{3, 2, 2}}}));
  EXPECT_EQ(n->outputs[0]->type.dims, (Dims{3, 2, 2}));
  for (int64_t f = 0; f < 12; ++f)
    EXPECT_EQ(read_view(n, x.view, unflatten(f, {3, 2, 2})), get(x.view, unflatten(f, {3, 4})));
  // Size-1 axes in and out do not block a view.
  Graph g2;
  Owned y = make_strided(DType::f16, {5, 1, 3}, {2, 1, 0});
  Node* m = view_node(g2, "reshape", y.view, attrs_of({{"shape", std::vector<int64_t>{1, 5, 3, 1}}}));
  for (int64_t f = 0; f < 15; ++f)
    EXPECT_EQ(read_view(m, y.view, unflatten(f, {1, 5, 3, 1})), get(y.view, unflatten(f, {5, 1, 3})));
}

TEST(Reshape, Errors) {
  Owned x = make_tensor(DType::f32, {2, 3, 4});
  Graph g;
  expect_error([&] { add_op(g, "reshape", {x.view}, attrs_of({{"shape", std::vector<int64_t>{5, 5}}}), "r1"); },
               {"node 'r1'", "reshape", "[5,5]", "invalid for input of size 24"});
  expect_error([&] { add_op(g, "reshape", {x.view}, attrs_of({{"shape", std::vector<int64_t>{-1, 2, -1}}})); },
               {"more than one -1"});
  expect_error([&] { add_op(g, "reshape", {x.view}, attrs_of({{"shape", std::vector<int64_t>{-1, 5}}})); },
               {"invalid for input of size 24"});
  Owned t = make_strided(DType::f32, {3, 4}, {1, 0});
  expect_error([&] { add_op(g, "reshape", {t.view}, attrs_of({{"shape", std::vector<int64_t>{12}}}), "r4"); },
               {"node 'r4'", "needs a copy", "contiguous"});
  Owned e = make_tensor(DType::f32, {0, 3});
  expect_error([&] { add_op(g, "reshape", {e.view}, attrs_of({{"shape", std::vector<int64_t>{0, -1}}})); },
               {"could be any size"});
}

TEST(Permute, NegativeDimsOnStridedInput) {
  Owned x = make_strided(DType::bf16, {2, 3, 5}, {1, 2, 0});
  Graph g;
  Node* n = view_node(g, "permute", x.view, attrs_of({{"dims", std::vector<int64_t>{-1, 0, 1}}}));
  EXPECT_EQ(n->outputs[0]->type.dims, (Dims{5, 2, 3}));
  for_each_index({5, 2, 3}, [&](const Dims& i) {
    EXPECT_EQ(read_view(n, x.view, i), get(x.view, {i[1], i[2], i[0]}));
  });
  expect_error([&] { add_op(g, "permute", {x.view}, attrs_of({{"dims", std::vector<int64_t>{0, 0, 1}}}), "p"); },
               {"node 'p'", "not a permutation", "repeats"});
  expect_error([&] { add_op(g, "permute", {x.view}, attrs_of({{"dims", std::vector<int64_t>{0, 1}}})); },
               {"not a permutation"});
  expect_error([&] { add_op(g, "permute", {x.view}, attrs_of({{"dims", std::vector<int64_t>{0, 1, 3}}})); },
               {"not a permutation", "out of range"});
}

TEST(Expand, BroadcastsWithZeroStrides) {
  Owned x = make_strided(DType::i64, {3, 1}, {1, 0});
  Graph g;
  Node* n = view_node(g, "expand", x.view, attrs_of({{"shape", std::vector<int64_t>{2, -1, 4}}}));
  const TensorType& t = n->outputs[0]->type;
  EXPECT_EQ(t.dims, (Dims{2, 3, 4}));
  EXPECT_EQ(t.strides[0], 0);
  EXPECT_EQ(t.strides[2], 0);
  for_each_index(t.dims, [&](const Dims& i) { EXPECT_EQ(read_view(n, x.view, i), get(x.view, {i[1], 0})); });
  expect_error([&] { add_op(g, "expand", {x.view}, attrs_of({{"shape", std::vector<int64_t>{4, 4}}}), "e"); },
               {"node 'e'", "cannot expand", "only size-1 dims expand"});
  expect_error([&] { add_op(g, "expand", {x.view}, attrs_of({{"shape", std::vector<int64_t>{-1, 3, 1}}})); },
               {"new leading dim"});
  expect_error([&] { add_op(g, "expand", {x.view}, attrs_of({{"shape", std::vector<int64_t>{3}}})); },
               {"fewer dims"});
}

// The indices torch's slice keeps: filter, not formula.
std::vector<int64_t> slice_reference(int64_t size, int64_t start, int64_t end, int64_t step) {
  auto norm = [size](int64_t v) {
    if (v < 0) v = v < -size ? 0 : v + size;
    return std::min(v, size);
  };
  const int64_t s = norm(start), e = norm(end);
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < size; ++i)
    if (i >= s && i < e && (i - s) % step == 0) kept.push_back(i);
  return kept;
}

TEST(Slice, MatchesTorchClampingOnStridedInput) {
  Owned x = make_strided(DType::u8, {4, 7, 3}, {2, 0, 1});
  struct Case {
    int64_t dim, start, end, step;
  };
  const std::vector<Case> cases = {{1, 0, kEnd, 1},  {1, 2, 5, 1},   {-2, -5, -1, 2}, {1, -100, 100, 3},
                                   {1, 5, 2, 1},     {1, 7, kEnd, 1}, {0, 1, kEnd, 2}, {-1, -1, kEnd, 1},
                                   {2, 0, 3, 5},     {1, 3, -4, 1},   {0, std::numeric_limits<int64_t>::min(), 2, 1}};
  for (const Case& c : cases) {
    Graph g;
    Node* n = view_node(g, "slice", x.view,
                        attrs_of({{"dim", c.dim}, {"start", c.start}, {"end", c.end}, {"step", c.step}}));
    const size_t d = static_cast<size_t>(c.dim < 0 ? c.dim + 3 : c.dim);
    std::vector<int64_t> kept = slice_reference(x.view.dims[d], c.start, c.end, c.step);
    const TensorType& t = n->outputs[0]->type;
    Dims want = x.view.dims;
    want[d] = static_cast<int64_t>(kept.size());
    ASSERT_EQ(t.dims, want) << "dim " << c.dim << " start " << c.start << " end " << c.end << " step " << c.step;
    for_each_index(t.dims, [&](const Dims& i) {
      Dims src = i;
      src[d] = kept[static_cast<size_t>(i[d])];
      EXPECT_EQ(read_view(n, x.view, i), get(x.view, src));
    });
  }
}

TEST(Slice, Errors) {
  Owned x = make_tensor(DType::f32, {4, 5});
  Graph g;
  expect_error([&] { add_op(g, "slice", {x.view}, attrs_of({{"dim", int64_t{2}}}), "s"); },
               {"node 's'", "dim 2 is out of range"});
  expect_error([&] { add_op(g, "slice", {x.view}, attrs_of({{"step", int64_t{0}}})); }, {"step must be positive"});
  Owned s = make_tensor(DType::f32, {});
  expect_error([&] { add_op(g, "slice", {s.view}, {}); }, {"at least one dim"});
}

TEST(Select, NegativeIndexAndViewOfView) {
  Owned x = make_strided(DType::f64, {3, 4, 5}, {1, 2, 0});
  Graph g;
  Value* in = g.add_input("x", x.view.type());
  Node* sel = g.add_node(get_op("select"), {in}, attrs_of({{"dim", int64_t{-2}}, {"index", int64_t{-1}}}), "sel");
  EXPECT_EQ(sel->outputs[0]->type.dims, (Dims{3, 5}));
  EXPECT_EQ(view_offset(*sel), 3 * x.view.strides[1]);
  Node* sl = g.add_node(get_op("slice"), {sel->outputs[0]},
                        attrs_of({{"dim", int64_t{1}}, {"start", int64_t{1}}, {"step", int64_t{2}}}), "sl");
  EXPECT_EQ(sl->outputs[0]->type.dims, (Dims{3, 2}));
  // Offsets chain: the slice's offset is relative to the select's output.
  const int64_t base = view_offset(*sel) + view_offset(*sl);
  for_each_index({3, 2}, [&](const Dims& i) {
    double through = get_at(x.view.data, x.view.dtype, base + offset_of(sl->outputs[0]->type.strides, i));
    EXPECT_EQ(through, get(x.view, {i[0], 3, 1 + 2 * i[1]}));
  });
  expect_error([&] { g.add_node(get_op("select"), {in}, attrs_of({{"dim", int64_t{0}}, {"index", int64_t{3}}}), "b"); },
               {"node 'b'", "index 3 is out of range", "size 3"});
  expect_error([&] { g.add_node(get_op("select"), {in}, attrs_of({{"dim", int64_t{0}}, {"index", int64_t{-4}}})); },
               {"out of range"});
}

TEST(SqueezeUnsqueeze, DropAndInsertUnitAxes) {
  Owned x = make_strided(DType::boolean, {1, 3, 1, 2}, {3, 1, 2, 0});
  Graph g;
  Node* all = view_node(g, "squeeze", x.view, {});
  EXPECT_EQ(all->outputs[0]->type.dims, (Dims{3, 2}));
  for_each_index({3, 2}, [&](const Dims& i) { EXPECT_EQ(read_view(all, x.view, i), get(x.view, {0, i[0], 0, i[1]})); });
  Graph g2;
  Node* some = view_node(g2, "squeeze", x.view, attrs_of({{"dims", std::vector<int64_t>{-2, 1}}}));
  EXPECT_EQ(some->outputs[0]->type.dims, (Dims{1, 3, 2}));  // dim 1 has size 3: kept
  for (int64_t dim : {0, 2, 4, -1, -5}) {
    Graph g3;
    Node* u = view_node(g3, "unsqueeze", x.view, attrs_of({{"dim", dim}}));
    const size_t at = static_cast<size_t>(dim < 0 ? dim + 5 : dim);
    const TensorType& t = u->outputs[0]->type;
    ASSERT_EQ(t.rank(), 5u);
    EXPECT_EQ(t.dims[at], 1);
    for_each_index(t.dims, [&](const Dims& i) {
      Dims src = i;
      src.erase(src.begin() + static_cast<std::ptrdiff_t>(at));
      EXPECT_EQ(read_view(u, x.view, i), get(x.view, src));
    });
  }
  expect_error([&] { add_op(g, "unsqueeze", {x.view}, attrs_of({{"dim", int64_t{5}}})); }, {"out of range"});
}

TEST(Views, AreDeclaredOnceWithoutCpuKernels) {
  for (const char* aten : {"aten.view.default", "aten.permute.default", "aten.expand.default", "aten.slice.Tensor",
                           "aten.select.int", "aten.squeeze.dim", "aten.unsqueeze.default"}) {
    const OpDef* op = find_op_for_aten(aten);
    ASSERT_NE(op, nullptr) << aten;
    EXPECT_TRUE(op->has(kView)) << aten;
  }
  Owned x = make_tensor(DType::f32, {2, 3});
  Graph g;
  Node* n = add_op(g, "permute", {x.view}, attrs_of({{"dims", std::vector<int64_t>{1, 0}}}));
  std::string reason;
  EXPECT_FALSE(cpu::cpu_supports(*n, &reason));
  Node* c = g.add_node(get_op("contiguous"), {g.inputs()[0]});
  expect_error([&] { view_offset(*c); }, {"not a view op"});
}

}  // namespace
}  // namespace kiln::test
