// Memory planner tests: invariants on hundreds of random elementwise DAGs
// (checked here independently of the planner's own verifier), hand-made
// cases with known optimal arenas, the strategy alone, the verifier
// rejecting broken plans, and the printed form.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "ir/graph.h"
#include "memory/arena_strategy.h"
#include "memory/liveness.h"
#include "memory/memory_plan.h"
#include "memory/plan_verifier.h"
#include "random_graphs.h"
#include "ops/op_def.h"
#include "ops/view_offset.h"
#include "support/error.h"

namespace kiln {
namespace {

using test::random_graph;

int64_t nbytes(const Value* v) { return v->type.numel() * static_cast<int64_t>(dtype_size(v->type.dtype)); }

bool is_view(const Value* v) {
  return v->kind == ValueKind::output && v->producer->op->has(kView) && v->output_index == 0;
}

// Checks the plan's invariants from the graph alone.
void check_invariants(const Graph& g, const MemoryPlan& plan, uint32_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<Node*> nodes = g.nodes();
  const int n = static_cast<int>(nodes.size());
  // Roots: follow views to the value owning the bytes; byte offsets add up.
  auto root = [](const Value* v) {
    int64_t bytes = 0;
    while (is_view(v)) {
      bytes += view_offset(*v->producer) * static_cast<int64_t>(dtype_size(v->type.dtype));
      v = v->producer->inputs[0];
    }
    return std::make_pair(v, bytes);
  };
  // Intervals recomputed here: [producer position, last read of it or of any
  // view of it], graph outputs read at n.
  std::map<const Value*, std::pair<int, int>> interval;
  auto read = [&](const Value* v, int pos) {
    const Value* r = root(v).first;
    if (interval.count(r)) interval[r].second = std::max(interval[r].second, pos);
  };
  for (int pos = 0; pos < n; ++pos) {
    for (const Value* in : nodes[pos]->inputs) read(in, pos);
    for (const Value* out : nodes[pos]->outputs)
      if (!is_view(out)) interval[out] = {pos, pos};
  }
  for (const Value* out : g.outputs()) read(out, n);

  std::set<const Value*> graph_outputs(g.outputs().begin(), g.outputs().end());
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    EXPECT_EQ(plan.at(g.inputs()[i]).storage, Storage::input);
    EXPECT_EQ(plan.at(g.inputs()[i]).index, static_cast<int>(i));
  }
  for (const Value* w : g.weights()) EXPECT_EQ(plan.at(w).storage, Storage::weight);
  for (const Value* l : g.literals()) EXPECT_EQ(plan.at(l).storage, Storage::literal);
  // Views alias their root at the right byte offset, inside the root's bytes.
  for (const Node* node : nodes) {
    const Value* v = node->outputs[0];
    if (!is_view(v)) continue;
    const ValuePlan& p = plan.at(v);
    ASSERT_EQ(p.storage, Storage::view) << v->name;
    EXPECT_EQ(p.source, node->inputs[0]);
    auto [r, offset] = root(v);
    EXPECT_EQ(p.root, r) << v->name;
    EXPECT_EQ(p.root_byte_offset, offset) << v->name;
    if (v->type.numel() > 0) EXPECT_LE(offset + v->type.storage_bytes(), r->type.storage_bytes()) << v->name;
  }

  struct Buf {
    const Value* v;
    int64_t offset, bytes;
    int first, last;
  };
  std::vector<Buf> bufs;
  int64_t sum_aligned = 0;
  for (const auto& [v, iv] : interval) {
    const ValuePlan& p = plan.at(v);
    if (graph_outputs.count(v)) {
      EXPECT_EQ(p.storage, Storage::output) << v->name;
      EXPECT_EQ(g.outputs()[p.index], v);
      continue;
    }
    ASSERT_EQ(p.storage, Storage::arena) << v->name;
    EXPECT_EQ(p.first, iv.first) << v->name;
    EXPECT_EQ(p.last, iv.second) << v->name;
    EXPECT_GE(p.bytes, nbytes(v));
    EXPECT_EQ(p.offset % 64, 0) << v->name;
    EXPECT_GE(p.offset, 0);
    EXPECT_LE(p.offset + nbytes(v), plan.arena_bytes) << v->name;
    sum_aligned += (nbytes(v) + 63) / 64 * 64;
    bufs.push_back({v, p.offset, nbytes(v), iv.first, iv.second});
  }
  EXPECT_LE(plan.arena_bytes, sum_aligned);
  for (size_t i = 0; i < bufs.size(); ++i)
    for (size_t j = i + 1; j < bufs.size(); ++j) {
      const Buf& a = bufs[i];
      const Buf& b = bufs[j];
      bool live_together = a.first <= b.last && b.first <= a.last;
      bool share_bytes = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      EXPECT_FALSE(live_together && share_bytes) << "%" << a.v->name << " and %" << b.v->name << " overlap";
    }
  // Every output slot is produced exactly once: in place or by a copy.
  std::vector<int> writes(g.outputs().size(), 0);
  for (const Value* v : graph_outputs) {
    const ValuePlan& p = plan.at(v);
    if (p.storage == Storage::output) ++writes[p.index];
  }
  for (const OutputCopy& c : plan.output_copies) {
    EXPECT_EQ(g.outputs()[c.output_index], c.source);
    ++writes[c.output_index];
  }
  for (size_t k = 0; k < writes.size(); ++k) EXPECT_EQ(writes[k], 1) << "output " << k;
  EXPECT_NO_THROW(verify_memory_plan(g, plan));
}

TEST(MemoryPlan, RandomGraphsBestFit) {
  for (uint32_t seed = 0; seed < 300; ++seed) {
    auto g = random_graph(seed, false);
    MemoryPlan plan = plan_memory(*g);
    check_invariants(*g, plan, seed);
  }
}

TEST(MemoryPlan, RandomGraphsFirstFit) {
  PlanOptions options;
  options.strategy = ArenaStrategy::greedy_by_size_first_fit;
  for (uint32_t seed = 1000; seed < 1300; ++seed) {
    auto g = random_graph(seed, seed % 2 == 0);
    MemoryPlan plan = plan_memory(*g, options);
    EXPECT_EQ(plan.strategy, ArenaStrategy::greedy_by_size_first_fit);
    check_invariants(*g, plan, seed);
  }
}

TEST(MemoryPlan, RandomGraphsWithViews) {
  int views = 0, view_copies = 0;
  for (uint32_t seed = 2000; seed < 2300; ++seed) {
    auto g = random_graph(seed, true);
    MemoryPlan plan = plan_memory(*g);
    check_invariants(*g, plan, seed);
    for (const ValuePlan& p : plan.values) views += p.storage == Storage::view && p.root_byte_offset != 0;
    for (const OutputCopy& c : plan.output_copies) view_copies += plan.at(c.source).storage == Storage::view;
  }
  EXPECT_GT(views, 50);  // the generator does make views with offsets
  EXPECT_GT(view_copies, 5);
}

TEST(MemoryPlan, ViewsKeepTheirRootAlive) {
  // a = relu(x) [4,6]; t = permute(a) [6,4]; s = slice(t, 0, 2..5) [3,4];
  // b = exp(x); c = add(s, b): a must stay live until c reads s.
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {4, 6}));
  Value* a = g.add_node(get_op("relu"), {x})->outputs[0];
  Attrs perm;
  perm.set("dims", std::vector<int64_t>{1, 0});
  Value* t = g.add_node(get_op("permute"), {a}, perm)->outputs[0];
  Attrs sl;
  sl.set("dim", int64_t{0});
  sl.set("start", int64_t{2});
  sl.set("end", int64_t{5});
  Value* s = g.add_node(get_op("slice"), {t}, sl)->outputs[0];
  Value* b = g.add_node(get_op("exp"), {x})->outputs[0];
  Value* xt = g.add_node(get_op("permute"), {x}, perm)->outputs[0];
  Value* xs = g.add_node(get_op("slice"), {xt}, sl)->outputs[0];
  Value* e = g.add_node(get_op("neg"), {xs})->outputs[0];
  Value* c = g.add_node(get_op("add"), {s, e})->outputs[0];
  g.set_outputs({c, s});
  MemoryPlan plan = plan_memory(g);
  const ValuePlan& ps = plan.at(s);
  EXPECT_EQ(ps.storage, Storage::view);
  EXPECT_EQ(ps.source, t);
  EXPECT_EQ(ps.root, a);
  EXPECT_EQ(ps.view_offset, 2);  // t's dim 0 has stride 1
  EXPECT_EQ(ps.root_byte_offset, 8);
  // s is a graph output (copied after the last node), so a lives to the end.
  EXPECT_EQ(plan.at(a).first, 0);
  EXPECT_EQ(plan.at(a).last, 8);
  EXPECT_EQ(plan.at(xs).storage, Storage::view);
  EXPECT_EQ(plan.at(xs).root, x);
  EXPECT_FALSE(plan.at(b).first <= plan.at(a).last && plan.at(a).offset == plan.at(b).offset);
  ASSERT_EQ(plan.output_copies.size(), 1u);
  EXPECT_EQ(plan.output_copies[0].source, s);
  verify_memory_plan(g, plan);
  std::string text = to_string(plan);
  EXPECT_NE(text.find("view of %" + t->name + " +2 (root %" + a->name + " +8 bytes)"), std::string::npos) << text;
  // Shrinking the root's interval below the view's last read is caught.
  MemoryPlan broken = plan;
  broken.values[broken.index.at(a)].last = 3;
  EXPECT_THROW(verify_memory_plan(g, broken), Error);
}

TEST(MemoryPlan, ChainReusesTwoBuffers) {
  // x -> relu -> relu -> ... -> relu (output): intermediates alternate between two slots.
  Graph g;
  Value* v = g.add_input("x", TensorType(DType::f32, {100}));  // 400 bytes -> 448 aligned
  for (int i = 0; i < 10; ++i) v = g.add_node(get_op("relu"), {v})->outputs[0];
  g.set_outputs({v});
  MemoryPlan plan = plan_memory(g);
  EXPECT_EQ(plan.arena_bytes, 2 * 448);
  EXPECT_EQ(plan.unshared_bytes(), 9 * 448);
  EXPECT_EQ(plan.at(v).storage, Storage::output);
  EXPECT_TRUE(plan.output_copies.empty());
  verify_memory_plan(g, plan);
}

TEST(MemoryPlan, NodeNeverWritesOntoItsInput) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {16}));
  Value* a = g.add_node(get_op("relu"), {x})->outputs[0];
  Value* b = g.add_node(get_op("exp"), {a})->outputs[0];
  Value* c = g.add_node(get_op("neg"), {b})->outputs[0];
  g.set_outputs({c});
  MemoryPlan plan = plan_memory(g);
  // a is read by the node writing b: they must not share bytes.
  EXPECT_NE(plan.at(a).offset, plan.at(b).offset);
  EXPECT_EQ(plan.arena_bytes, 128);
}

TEST(MemoryPlan, LongLivedValueBlocksReuse) {
  // a is read at the end, so it stays live across the chain.
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {16}));  // 64 bytes
  Value* a = g.add_node(get_op("relu"), {x})->outputs[0];
  Value* v = a;
  for (int i = 0; i < 4; ++i) v = g.add_node(get_op("exp"), {v})->outputs[0];
  Value* out = g.add_node(get_op("add"), {v, a})->outputs[0];
  g.set_outputs({out});
  MemoryPlan plan = plan_memory(g);
  EXPECT_EQ(plan.at(a).first, 0);
  EXPECT_EQ(plan.at(a).last, 5);
  EXPECT_EQ(plan.arena_bytes, 3 * 64);  // a plus two alternating chain slots
  verify_memory_plan(g, plan);
}

TEST(MemoryPlan, OutputsThatAreNotKernelResultsAreCopied) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {4}));
  Value* w = g.add_weight("w", TensorType(DType::f32, {4}), "fc.weight");
  Value* c = g.add_scalar(1.5, DType::f32);
  Value* y = g.add_node(get_op("add"), {x, w})->outputs[0];
  g.set_outputs({y, x, w, c, y});
  MemoryPlan plan = plan_memory(g);
  EXPECT_EQ(plan.at(y).storage, Storage::output);
  EXPECT_EQ(plan.at(y).index, 0);
  ASSERT_EQ(plan.output_copies.size(), 4u);
  EXPECT_EQ(plan.output_copies[0].output_index, 1);
  EXPECT_EQ(plan.output_copies[0].source, x);
  EXPECT_EQ(plan.output_copies[1].source, w);
  EXPECT_EQ(plan.output_copies[2].source, c);
  EXPECT_EQ(plan.output_copies[3].output_index, 4);
  EXPECT_EQ(plan.output_copies[3].source, y);
  EXPECT_EQ(plan.arena_bytes, 0);
  verify_memory_plan(g, plan);
}

TEST(MemoryPlan, UnreadOutputStillGetsBytes) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {16}));
  Value* dead = g.add_node(get_op("relu"), {x})->outputs[0];
  Value* y = g.add_node(get_op("exp"), {x})->outputs[0];
  g.set_outputs({y});
  MemoryPlan plan = plan_memory(g);
  EXPECT_EQ(plan.at(dead).storage, Storage::arena);
  EXPECT_EQ(plan.at(dead).first, 0);
  EXPECT_EQ(plan.at(dead).last, 0);
  EXPECT_EQ(plan.arena_bytes, 64);
}

TEST(MemoryPlan, AlignmentOption) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {3}));
  Value* a = g.add_node(get_op("relu"), {x})->outputs[0];
  Value* b = g.add_node(get_op("exp"), {a})->outputs[0];
  Value* c = g.add_node(get_op("add"), {a, b})->outputs[0];
  g.set_outputs({c});
  PlanOptions options;
  options.alignment = 256;
  MemoryPlan plan = plan_memory(g, options);
  EXPECT_EQ(plan.arena_bytes, 512);
  EXPECT_EQ(plan.at(a).offset % 256, 0);
  EXPECT_EQ(plan.at(b).offset % 256, 0);
  verify_memory_plan(g, plan);
  options.alignment = 48;
  EXPECT_THROW(plan_memory(g, options), Error);
}

TEST(ArenaStrategy, StacksLiveBuffersAndReusesDeadOnes) {
  std::vector<ArenaRequest> reqs = {
      {1024, 0, 10},  // A
      {128, 0, 1},    // B
      {512, 0, 10},   // C
      {64, 0, 1},     // D
      {256, 0, 10},   // E
      {64, 5, 6},     // F: alive only after B and D died
  };
  // By size: A, C, E, B, D all live at position 0, so they stack: 0, 1024, 1536, 1792, 1920.
  ArenaAssignment a = assign_offsets(reqs, 64, ArenaStrategy::greedy_by_size_best_fit);
  EXPECT_EQ(a.offsets[0], 0);
  EXPECT_EQ(a.offsets[2], 1024);
  EXPECT_EQ(a.offsets[4], 1536);
  EXPECT_EQ(a.offsets[1], 1792);
  EXPECT_EQ(a.offsets[3], 1920);
  // F conflicts only with A, C, E and takes B's bytes.
  EXPECT_EQ(a.offsets[5], 1792);
  EXPECT_EQ(a.arena_bytes, 1984);
}

TEST(ArenaStrategy, BestFitVersusFirstFitGaps) {
  // Placed, in size order: P(256) [0,256), Q(192) [256,448) dies at 1,
  // R(128) [448,576), S(64) [576,640) dies at 1, T(32->64) [640,704).
  // Then U(64) alive at [2,3] conflicts with P, R, T only: gaps [256,448) (192)
  // and [576,640) (64). Best fit takes 576, first fit 256.
  std::vector<ArenaRequest> reqs = {
      {256, 0, 3}, {192, 0, 1}, {128, 0, 3}, {64, 0, 1}, {32, 0, 3}, {64, 2, 3},
  };
  // Give U a smaller size than S so it is placed after S.
  reqs[5].bytes = 40;
  ArenaAssignment best = assign_offsets(reqs, 64, ArenaStrategy::greedy_by_size_best_fit);
  ArenaAssignment first = assign_offsets(reqs, 64, ArenaStrategy::greedy_by_size_first_fit);
  EXPECT_EQ(best.offsets[1], 256);
  EXPECT_EQ(best.offsets[3], 576);
  EXPECT_EQ(best.offsets[5], 576);
  EXPECT_EQ(first.offsets[5], 256);
  EXPECT_EQ(best.arena_bytes, 704);
}

TEST(ArenaStrategy, ZeroBytesAndBadInput) {
  std::vector<ArenaRequest> reqs = {{0, 0, 5}, {10, 0, 5}};
  ArenaAssignment a = assign_offsets(reqs, 64, ArenaStrategy::greedy_by_size_best_fit);
  EXPECT_EQ(a.arena_bytes, 64);
  EXPECT_EQ(a.offsets[1], 0);
  std::vector<ArenaRequest> bad = {{10, 3, 2}};
  EXPECT_THROW(assign_offsets(bad, 64, ArenaStrategy::greedy_by_size_best_fit), Error);
  EXPECT_THROW(assign_offsets(reqs, 3, ArenaStrategy::greedy_by_size_best_fit), Error);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(PlanVerifier, RejectsBrokenPlans) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {16}));
  Value* a = g.add_node(get_op("relu"), {x}, {}, "na")->outputs[0];
  Value* b = g.add_node(get_op("exp"), {a}, {}, "nb")->outputs[0];
  Value* c = g.add_node(get_op("add"), {a, b}, {}, "nc")->outputs[0];
  g.set_outputs({c});
  const MemoryPlan good = plan_memory(g);
  verify_memory_plan(g, good);

  auto broken = [&](auto&& mutate) {
    MemoryPlan p = good;
    mutate(p);
    return error_of([&] { verify_memory_plan(g, p); });
  };
  auto& ia = good.index.at(a);
  auto& ib = good.index.at(b);
  EXPECT_NE(broken([&](MemoryPlan& p) { p.values[ib].offset = p.values[ia].offset; }).find("overlap"),
            std::string::npos);
  EXPECT_NE(broken([&](MemoryPlan& p) { p.values[ia].offset += 4; }).find("is not aligned"), std::string::npos);
  EXPECT_NE(broken([&](MemoryPlan& p) { p.arena_bytes = 64; }).find("ends past the arena"), std::string::npos);
  // a is read by node 'nc' at position 2; shrinking its interval is caught.
  std::string msg = broken([&](MemoryPlan& p) { p.values[ia].last = 1; });
  EXPECT_NE(msg.find("read by node 'nc'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'%" + a->name + "'"), std::string::npos) << msg;
  EXPECT_NE(broken([&](MemoryPlan& p) { p.values[p.index.at(c)].storage = Storage::arena; }).find("output"),
            std::string::npos);
  EXPECT_NE(broken([&](MemoryPlan& p) { p.values[p.index.at(x)].storage = Storage::arena; }).find("'%x' is input 0"),
            std::string::npos);
  EXPECT_NE(broken([&](MemoryPlan& p) { p.values[ia].bytes = 8; }).find("needs 64 bytes"), std::string::npos);
}

TEST(MemoryPlan, PrintsEveryValue) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {2, 3}));
  Value* w = g.add_weight("w", TensorType(DType::f32, {2, 3}), "fc.weight");
  Value* a = g.add_node(get_op("mul"), {x, w}, {}, "a")->outputs[0];
  Value* y = g.add_node(get_op("relu"), {a}, {}, "y")->outputs[0];
  g.set_outputs({y, x});
  std::string text = to_string(plan_memory(g));
  EXPECT_NE(text.find("memory plan: arena 64 bytes, alignment 64, greedy_by_size_best_fit (64 bytes without reuse)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("%x"), std::string::npos);
  EXPECT_NE(text.find("input 0"), std::string::npos);
  EXPECT_NE(text.find("weight 0 \"fc.weight\""), std::string::npos);
  EXPECT_NE(text.find("arena [0, 24) live [0, 1]"), std::string::npos) << text;
  EXPECT_NE(text.find("output 0"), std::string::npos);
  EXPECT_NE(text.find("f32[2,3]"), std::string::npos);
  EXPECT_NE(text.find("copy %x -> output 1"), std::string::npos) << text;
  (void)a;
  (void)y;
}

TEST(Liveness, ViewsOfNothingAndPositions) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {4}));
  Value* a = g.add_node(get_op("relu"), {x})->outputs[0];
  Value* b = g.add_node(get_op("neg"), {x})->outputs[0];
  Value* c = g.add_node(get_op("add"), {a, b})->outputs[0];
  g.set_outputs({c});
  Liveness live = compute_liveness(g);
  EXPECT_EQ(live.num_positions, 3);
  EXPECT_EQ(live.at(x).last_use, 1);
  EXPECT_EQ(live.at(a).def, 0);
  EXPECT_EQ(live.at(a).last_use, 2);
  EXPECT_EQ(live.at(c).last_use, 3);
  EXPECT_EQ(live.at(c).root, c);
}

}  // namespace
}  // namespace kiln
