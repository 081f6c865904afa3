// Executable tests: argument checking (each error names the input or weight),
// end-to-end results against hand-computed values, weights bound by pointer,
// outputs written into the caller's buffers on every call, output copies
// (outputs that are inputs, weights, literals, views), views into the arena,
// the allocator being asked for the arena once, and the per-kernel compile timings.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

#include "ir/graph.h"
#include "ops/op_def.h"
#include "runtime/allocator.h"
#include "runtime/executable.h"
#include "support/error.h"

namespace kiln {
namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

#define EXPECT_ERROR_HAS(stmt, ...)                                                   \
  do {                                                                                \
    std::string msg_ = error_of([&] { stmt; });                                       \
    for (const char* part : {__VA_ARGS__}) EXPECT_NE(msg_.find(part), std::string::npos) << msg_; \
  } while (0)

TensorView view_of(std::vector<float>& data, Dims dims) { return TensorView(data.data(), TensorType(DType::f32, dims)); }

// out = relu(x * w + y), w a weight broadcast over rows.
std::unique_ptr<Graph> affine_relu_graph() {
  auto g = std::make_unique<Graph>();
  Value* x = g->add_input("x", TensorType(DType::f32, {2, 3}));
  Value* y = g->add_input("y", TensorType(DType::f32, {2, 3}));
  Value* w = g->add_weight("w", TensorType(DType::f32, {3}), "fc.weight");
  Value* m = g->add_node(get_op("mul"), {x, w})->outputs[0];
  Value* s = g->add_node(get_op("add"), {m, y})->outputs[0];
  Value* r = g->add_node(get_op("relu"), {s})->outputs[0];
  g->set_outputs({r});
  return g;
}

TEST(Executable, RunsEndToEnd) {
  Executable exe(affine_relu_graph());
  std::vector<float> w = {1, -2, 0.5f};
  exe.bind_weight("fc.weight", view_of(w, {3}));
  std::vector<float> x = {1, 2, 3, -4, 5, 6};
  std::vector<float> y = {0.5f, 1, -1, 2, 3, -4};
  std::vector<float> out(6, -99);
  TensorView ins[] = {view_of(x, {2, 3}), view_of(y, {2, 3})};
  TensorView outs[] = {view_of(out, {2, 3})};
  exe.run(ins, outs);
  // x*w = [1,-4,1.5,-4,-10,3]; + y = [1.5,-3,0.5,-2,-7,-1]; relu.
  EXPECT_EQ(out, (std::vector<float>{1.5f, 0, 0.5f, 0, 0, 0}));
  EXPECT_EQ(exe.input_types().size(), 2u);
  EXPECT_EQ(exe.input_types()[1], TensorType(DType::f32, {2, 3}));
  EXPECT_EQ(exe.output_types(), (std::vector<TensorType>{TensorType(DType::f32, {2, 3})}));
  EXPECT_EQ(exe.weight_keys(), (std::vector<std::string>{"fc.weight"}));
  std::string text = exe.describe();
  EXPECT_NE(text.find("3 kernels"), std::string::npos) << text;
  EXPECT_NE(text.find("= mul(%x, %w)  [cpu mul]"), std::string::npos) << text;
  EXPECT_NE(text.find("memory plan: arena"), std::string::npos) << text;
}

TEST(Executable, StepTimingsNameEachKernelAndTimeOnlyTheFirstCall) {
  Executable exe(affine_relu_graph());
  std::vector<Executable::StepTiming> before = exe.step_timings();
  ASSERT_EQ(before.size(), 3u);
  EXPECT_EQ(before[0].kernel, "cpu mul");
  EXPECT_EQ(before[2].kernel, "cpu relu");
  for (const auto& t : before) {
    EXPECT_GE(t.lower_ms, 0.0) << t.node;
    EXPECT_EQ(t.first_run_ms, -1.0) << t.node;  // not launched yet
  }
  std::vector<float> w = {1, -2, 0.5f}, x(6, 1.0f), y(6, 0.0f), out(6);
  exe.bind_weight("fc.weight", view_of(w, {3}));
  TensorView ins[] = {view_of(x, {2, 3}), view_of(y, {2, 3})};
  TensorView outs[] = {view_of(out, {2, 3})};
  exe.run(ins, outs);
  std::vector<Executable::StepTiming> first = exe.step_timings();
  for (size_t k = 0; k < first.size(); ++k) {
    EXPECT_GE(first[k].first_run_ms, 0.0) << first[k].node;
    EXPECT_EQ(first[k].lower_ms, before[k].lower_ms);
  }
  exe.run(ins, outs);
  for (size_t k = 0; k < first.size(); ++k)
    EXPECT_EQ(exe.step_timings()[k].first_run_ms, first[k].first_run_ms) << "later calls are not timed";
}

TEST(Executable, InputErrorsNameTheInput) {
  Executable exe(affine_relu_graph());
  std::vector<float> w(3, 1), x(6, 1), y(6, 1), out(6), big(12, 1);
  exe.bind_weight("fc.weight", view_of(w, {3}));
  TensorView outs[] = {view_of(out, {2, 3})};
  {
    TensorView ins[] = {view_of(x, {2, 3})};
    EXPECT_ERROR_HAS(exe.run(ins, outs), "expected 2 inputs, got 1");
  }
  {
    TensorView bad = view_of(y, {2, 3});
    bad.dtype = DType::f16;
    TensorView ins[] = {view_of(x, {2, 3}), bad};
    EXPECT_ERROR_HAS(exe.run(ins, outs), "input 1 (%y)", "dtype f16, expected f32");
  }
  {
    TensorView ins[] = {view_of(big, {2, 6}), view_of(y, {2, 3})};
    EXPECT_ERROR_HAS(exe.run(ins, outs), "input 0 (%x)", "dims [2,6], expected [2,3]");
  }
  {
    TensorView ins[] = {view_of(x, {2, 3}), view_of(y, {6})};
    EXPECT_ERROR_HAS(exe.run(ins, outs), "input 1 (%y)", "rank 1", "expected rank 2");
  }
  {
    TensorView bad = view_of(x, {2, 3});
    bad.device = Device{DeviceKind::cuda, 0};
    TensorView ins[] = {bad, view_of(y, {2, 3})};
    EXPECT_ERROR_HAS(exe.run(ins, outs), "input 0 (%x)", "is on cuda:0, expected cpu");
  }
  {
    TensorView bad = view_of(y, {2, 3});
    bad.strides = {1, 2};  // a transposed layout
    TensorView ins[] = {view_of(x, {2, 3}), bad};
    EXPECT_ERROR_HAS(exe.run(ins, outs), "input 1 (%y)", "strides [1,2], expected [3,1]");
  }
  {
    TensorView bad = view_of(x, {2, 3});
    bad.data = nullptr;
    TensorView ins[] = {bad, view_of(y, {2, 3})};
    EXPECT_ERROR_HAS(exe.run(ins, outs), "input 0 (%x)", "null data pointer");
  }
  TensorView ins[] = {view_of(x, {2, 3}), view_of(y, {2, 3})};
  {
    TensorView bad_outs[] = {view_of(big, {3, 2})};
    EXPECT_ERROR_HAS(exe.run(ins, bad_outs), "output 0 (%", "dims [3,2], expected [2,3]");
    TensorView strided = view_of(big, {2, 3});
    strided.strides = {6, 2};
    TensorView strided_outs[] = {strided};
    EXPECT_ERROR_HAS(exe.run(ins, strided_outs), "output 0 (%", "expected a contiguous buffer");
    EXPECT_ERROR_HAS(exe.run(ins, std::span<const TensorView>()), "expected 1 output buffers, got 0");
  }
  EXPECT_NO_THROW(exe.run(ins, outs));
}

TEST(Executable, SizeOneDimsMayCarryAnyStride) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {1, 3}));
  g.set_outputs({g.add_node(get_op("neg"), {x})->outputs[0]});
  Executable exe(g);
  std::vector<float> xd = {1, 2, 3}, out(3);
  TensorView in = view_of(xd, {1, 3});
  in.strides = {1, 1};  // torch may report this for a [1,3] tensor
  TensorView ins[] = {in};
  TensorView outs[] = {view_of(out, {1, 3})};
  exe.run(ins, outs);
  EXPECT_EQ(out, (std::vector<float>{-1, -2, -3}));
}

TEST(Executable, WeightErrorsNameTheWeight) {
  Executable exe(affine_relu_graph());
  std::vector<float> x(6, 1), y(6, 1), out(6), w(4, 1);
  TensorView ins[] = {view_of(x, {2, 3}), view_of(y, {2, 3})};
  TensorView outs[] = {view_of(out, {2, 3})};
  EXPECT_ERROR_HAS(exe.run(ins, outs), "weight 'fc.weight' (%w) is not bound");
  EXPECT_ERROR_HAS(exe.bind_weight("fc.weight", view_of(w, {4})), "weight 'fc.weight' (%w)", "dims [4], expected [3]");
  TensorView wrong_dtype = view_of(w, {3});
  wrong_dtype.dtype = DType::i32;
  EXPECT_ERROR_HAS(exe.bind_weight("fc.weight", wrong_dtype), "weight 'fc.weight'", "dtype i32, expected f32");
  TensorView wrong_strides = view_of(w, {3});
  wrong_strides.strides = {2};
  EXPECT_ERROR_HAS(exe.bind_weight("fc.weight", wrong_strides), "weight 'fc.weight'", "strides [2], expected [1]");
  EXPECT_ERROR_HAS(exe.bind_weight("fc.bias", view_of(w, {3})), "no weight 'fc.bias'", "'fc.weight'");
  // Failed binds leave the weight unbound.
  EXPECT_ERROR_HAS(exe.run(ins, outs), "weight 'fc.weight' (%w) is not bound");
}

TEST(Executable, WeightsAreBoundByPointer) {
  Executable exe(affine_relu_graph());
  std::vector<float> w = {1, 1, 1};
  exe.bind_weight("fc.weight", view_of(w, {3}));
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, y(6, 0), out(6);
  TensorView ins[] = {view_of(x, {2, 3}), view_of(y, {2, 3})};
  TensorView outs[] = {view_of(out, {2, 3})};
  exe.run(ins, outs);
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  w = {2, 0, 10};  // an in-place update, as an optimizer step would do
  exe.run(ins, outs);
  EXPECT_EQ(out, (std::vector<float>{2, 0, 30, 8, 0, 60}));
  // The weight's bytes are not inside the arena.
  ASSERT_NE(exe.arena_data(), nullptr);
  auto arena = reinterpret_cast<uintptr_t>(exe.arena_data());
  auto wp = reinterpret_cast<uintptr_t>(w.data());
  uintptr_t arena_end = arena + static_cast<uintptr_t>(exe.plan().arena_bytes);
  EXPECT_TRUE(wp + w.size() * sizeof(float) <= arena || wp >= arena_end);
  EXPECT_EQ(exe.plan().at(exe.graph().weights()[0]).storage, Storage::weight);
}

TEST(Executable, OutputsAreWrittenIntoEachCallersBuffer) {
  Executable exe(affine_relu_graph());
  std::vector<float> w = {1, 1, 1};
  exe.bind_weight("fc.weight", view_of(w, {3}));
  std::vector<float> x1 = {1, 2, 3, 4, 5, 6}, x2 = {6, 5, 4, 3, 2, 1}, y(6, 0), out1(6), out2(6);
  TensorView ins1[] = {view_of(x1, {2, 3}), view_of(y, {2, 3})};
  TensorView ins2[] = {view_of(x2, {2, 3}), view_of(y, {2, 3})};
  TensorView outs1[] = {view_of(out1, {2, 3})};
  TensorView outs2[] = {view_of(out2, {2, 3})};
  exe.run(ins1, outs1);
  const void* arena = exe.arena_data();
  exe.run(ins2, outs2);
  EXPECT_EQ(out1, x1);  // the first result survives the second call
  EXPECT_EQ(out2, x2);
  EXPECT_EQ(exe.arena_data(), arena);  // allocated once
}

TEST(Executable, OutputsThatAreInputsWeightsLiteralsOrRepeatsAreCopied) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {2, 2}));
  Value* w = g.add_weight("w", TensorType(DType::f32, {2, 2}), "w");
  Value* c = g.add_literal("c", TensorType(DType::f32, {2}), [] {
    std::vector<uint8_t> b(8);
    float v[2] = {7, 8};
    std::memcpy(b.data(), v, 8);
    return b;
  }());
  Value* s = g.add_node(get_op("add"), {x, w})->outputs[0];
  g.set_outputs({s, x, w, c, s});
  Executable exe(g);
  std::vector<float> wd = {10, 20, 30, 40}, xd = {1, 2, 3, 4};
  exe.bind_weight("w", view_of(wd, {2, 2}));
  std::vector<float> o0(4), o1(4), o2(4), o3(2), o4(4);
  TensorView ins[] = {view_of(xd, {2, 2})};
  TensorView outs[] = {view_of(o0, {2, 2}), view_of(o1, {2, 2}), view_of(o2, {2, 2}), view_of(o3, {2}),
                       view_of(o4, {2, 2})};
  exe.run(ins, outs);
  EXPECT_EQ(o0, (std::vector<float>{11, 22, 33, 44}));
  EXPECT_EQ(o1, xd);
  EXPECT_EQ(o2, wd);
  EXPECT_EQ(o3, (std::vector<float>{7, 8}));
  EXPECT_EQ(o4, o0);
  // Copies, not aliases: changing the sources afterwards leaves the outputs.
  xd[0] = -1;
  wd[0] = -1;
  EXPECT_EQ(o1[0], 1);
  EXPECT_EQ(o2[0], 10);
  EXPECT_EQ(exe.plan().output_copies.size(), 4u);
}

Attrs attrs_of(std::initializer_list<std::pair<const char*, AttrValue>> items) {
  Attrs a;
  for (const auto& [k, v] : items) a.set(k, v);
  return a;
}

TEST(Executable, ViewsIntoTheArenaAndViewOutputs) {
  // a = exp(x) [3,4]; t = permute(a) [4,3]; s = slice(t, dim 0, 1..3) [2,3] at
  // offset 1 element; out0 = neg(s); out1 = s (a strided view: copied).
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {3, 4}));
  Value* a = g.add_node(get_op("relu"), {x})->outputs[0];
  Value* t = g.add_node(get_op("permute"), {a}, attrs_of({{"dims", std::vector<int64_t>{1, 0}}}))->outputs[0];
  Value* s = g.add_node(get_op("slice"), {t},
                        attrs_of({{"dim", int64_t{0}}, {"start", int64_t{1}}, {"end", int64_t{3}}}))
                 ->outputs[0];
  Value* n = g.add_node(get_op("neg"), {s})->outputs[0];
  g.set_outputs({n, s});
  Executable exe(g);
  EXPECT_EQ(exe.plan().at(exe.graph().find_value(s->name)).storage, Storage::view);
  std::vector<float> xd(12);
  std::iota(xd.begin(), xd.end(), 0.0f);  // x[i][j] = 4i + j
  std::vector<float> o0(6), o1(6);
  TensorView ins[] = {view_of(xd, {3, 4})};
  TensorView outs[] = {view_of(o0, {2, 3}), view_of(o1, {2, 3})};
  exe.run(ins, outs);
  // s[i][j] = t[i+1][j] = a[j][i+1] = 4j + i + 1.
  std::vector<float> expect_s = {1, 5, 9, 2, 6, 10};
  EXPECT_EQ(o1, expect_s);
  for (float& v : expect_s) v = -v;
  EXPECT_EQ(o0, expect_s);
  EXPECT_NE(exe.describe().find("1 output copies"), std::string::npos);
}

TEST(Executable, ViewOfAnInputNeedsNoArena) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::f32, {4, 2}));
  Value* s = g.add_node(get_op("slice"), {x},
                        attrs_of({{"dim", int64_t{0}}, {"start", int64_t{2}}, {"end", int64_t{4}}}))
                 ->outputs[0];
  Value* r = g.add_node(get_op("reshape"), {s}, attrs_of({{"shape", std::vector<int64_t>{4}}}))->outputs[0];
  Value* e = g.add_node(get_op("abs"), {r})->outputs[0];
  g.set_outputs({e});
  Executable exe(g);
  EXPECT_EQ(exe.plan().arena_bytes, 0);
  std::vector<float> xd = {0, -1, 2, -3, 4, -5, 6, -7}, out(4);
  TensorView ins[] = {view_of(xd, {4, 2})};
  TensorView outs[] = {view_of(out, {4})};
  exe.run(ins, outs);
  EXPECT_EQ(out, (std::vector<float>{4, 5, 6, 7}));
  EXPECT_EQ(exe.arena_data(), nullptr);
}

TEST(Executable, ArenaComesFromTheGivenAllocatorOnce) {
  int calls = 0;
  size_t requested = 0;
  auto alloc = std::make_shared<CallbackAllocator>(Device{}, [&](size_t bytes, size_t alignment) {
    ++calls;
    requested = bytes;
    return cpu_allocator()->allocate(bytes, alignment);
  });
  ExecutableOptions options;
  options.allocator = alloc;
  Executable exe(affine_relu_graph(), Device{}, options);
  std::vector<float> w(3, 1), x(6, 1), y(6, 1), out(6);
  exe.bind_weight("fc.weight", view_of(w, {3}));
  TensorView ins[] = {view_of(x, {2, 3}), view_of(y, {2, 3})};
  TensorView outs[] = {view_of(out, {2, 3})};
  EXPECT_EQ(calls, 0);  // lazily, at the first call
  exe.run(ins, outs);
  exe.run(ins, outs);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(requested, static_cast<size_t>(exe.plan().arena_bytes));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(exe.arena_data()) % 64, 0u);
}

TEST(Executable, RejectsOutputsOverlappingInputsOrEachOther) {
  Executable exe(affine_relu_graph());
  std::vector<float> w(3, 1), x(6, 1), y(6, 1), out(6);
  exe.bind_weight("fc.weight", view_of(w, {3}));
  TensorView ins[] = {view_of(x, {2, 3}), view_of(y, {2, 3})};
  TensorView into_input[] = {view_of(y, {2, 3})};
  EXPECT_ERROR_HAS(exe.run(ins, into_input), "output 0 overlaps input 1 (%y)");
  Graph g;
  Value* a = g.add_input("a", TensorType(DType::f32, {2}));
  Value* r = g.add_node(get_op("relu"), {a})->outputs[0];
  g.set_outputs({r, r});
  Executable twice(g);
  std::vector<float> ad = {1, -1}, buf(3);
  TensorView ins2[] = {view_of(ad, {2})};
  TensorView same[] = {TensorView(buf.data(), TensorType(DType::f32, {2})),
                       TensorView(buf.data() + 1, TensorType(DType::f32, {2}))};
  EXPECT_ERROR_HAS(twice.run(ins2, same), "output 1 overlaps output 0");
}

TEST(Executable, RejectsOutputsOverlappingAWeightUntilItIsRebound) {
  Executable exe(affine_relu_graph());
  std::vector<float> w(3, 1), x(6, 1), y(6, 1), out(6), elsewhere(3, 1);
  exe.bind_weight("fc.weight", TensorView(out.data() + 3, TensorType(DType::f32, {3})));
  TensorView ins[] = {view_of(x, {2, 3}), view_of(y, {2, 3})};
  TensorView outs[] = {view_of(out, {2, 3})};
  EXPECT_ERROR_HAS(exe.run(ins, outs), "output 0 overlaps weight 'fc.weight'");
  exe.bind_weight("fc.weight", view_of(elsewhere, {3}));
  exe.run(ins, outs);
  EXPECT_EQ(out, std::vector<float>(6, 2));
}

TEST(Executable, RunIntoWritesAtTheGivenAddressesAndChecksThem) {
  Executable exe(affine_relu_graph());
  std::vector<float> w = {1, -2, 0.5f}, x = {1, 2, 3, -4, 5, 6}, y = {0.5f, 1, -1, 2, 3, -4}, out(6, -99);
  exe.bind_weight("fc.weight", view_of(w, {3}));
  TensorView ins[] = {view_of(x, {2, 3}), view_of(y, {2, 3})};
  void* address[] = {out.data()};
  exe.run_into(ins, address);
  EXPECT_EQ(out, (std::vector<float>{1.5f, 0, 0.5f, 0, 0, 0}));
  void* none[] = {nullptr};
  EXPECT_ERROR_HAS(exe.run_into(ins, none), "run_into: output 0 has a null address");
  void* two[] = {out.data(), out.data()};
  EXPECT_ERROR_HAS(exe.run_into(ins, two), "run_into: expected 1 output addresses, got 2");
  void* into_input[] = {y.data()};
  EXPECT_ERROR_HAS(exe.run_into(ins, into_input), "output 0 overlaps input 1 (%y)");
}

TEST(Executable, RejectsDevicesWithoutABackend) {
  // No machine has 100 GPUs; without the CUDA plugin or a driver the message
  // says that instead, after the same prefix.
  EXPECT_ERROR_HAS(Executable(affine_relu_graph(), Device{DeviceKind::cuda, 99}), "no backend for device cuda:99");
}

TEST(Allocator, CpuAllocationsAreAligned) {
  DeviceBuffer b = cpu_allocator()->allocate(100, 256);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 256, 0u);
  EXPECT_EQ(b.bytes(), 100u);
  DeviceBuffer moved = std::move(b);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(cpu_allocator()->allocate(0, 64).data(), nullptr);
  EXPECT_THROW(cpu_allocator()->allocate(8, 3), Error);
}

}  // namespace
}  // namespace kiln
