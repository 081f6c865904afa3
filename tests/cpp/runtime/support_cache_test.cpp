// supports_cached (runtime/support_cache.h): a node kind found supported is not
// asked again on the same device; another type, attribute, value kind or
// device is asked anew; an unsupported answer is asked every time, with its
// reason; a fused node is never cached; the stats count each kind of answer.
#include <gtest/gtest.h>

#include "ir/graph.h"
#include "ops/op_def.h"
#include "runtime/support_cache.h"
#include "support/error.h"

namespace kiln {
namespace {

// Answers supports() itself and counts how often it was asked; nothing else runs.
class CountingBackend final : public Backend {
 public:
  explicit CountingBackend(int index, std::string refuse = "") : index_(index), refuse_(std::move(refuse)) {}
  Device device() const override { return Device{DeviceKind::cpu, index_}; }
  bool supports(const Node& node, std::string* reason) const override {
    ++asked;
    if (node.op->name != refuse_) return true;
    if (reason) *reason = "no kernel for " + node.name;
    return false;
  }
  std::unique_ptr<BackendKernel> lower(const Node&) const override { fail(ErrorKind::unsupported, "not lowered"); }
  void copy(const TensorView&, const TensorView&, Stream) const override {}
  void upload(void*, const void*, size_t) const override {}
  void download(void*, const void*, size_t) const override {}
  std::shared_ptr<Allocator> default_allocator() const override { return nullptr; }
  mutable int asked = 0;

 private:
  int index_;
  std::string refuse_;
};

TensorType f32(Dims dims) { return TensorType(DType::f32, std::move(dims)); }

// Each test uses its own device index: the cache is process-wide.
TEST(SupportCache, SameKindIsAskedOnce) {
  CountingBackend backend(101);
  Graph g;
  Value* x = g.add_input("x", f32({4, 8}));
  Value* y = g.add_input("y", f32({4, 8}));
  Node* first = g.add_node(get_op("add"), {x, y});
  Node* second = g.add_node(get_op("add"), {y, x});
  EXPECT_TRUE(supports_cached(backend, *first, nullptr));
  EXPECT_TRUE(supports_cached(backend, *second, nullptr));
  EXPECT_EQ(backend.asked, 1);
}

TEST(SupportCache, OtherTypesAttributesKindsAndDevicesAreAskedAnew) {
  CountingBackend backend(102), other_device(103);
  Graph g;
  Value* x = g.add_input("x", f32({4, 8}));
  Value* y = g.add_input("y", f32({4, 8}));
  Value* w = g.add_weight("w", f32({4, 8}), "w");
  Value* z = g.add_input("z", f32({2, 8}));
  EXPECT_TRUE(supports_cached(backend, *g.add_node(get_op("mul"), {x, y}), nullptr));
  EXPECT_TRUE(supports_cached(backend, *g.add_node(get_op("mul"), {x, w}), nullptr));  // a weight, not an input
  EXPECT_TRUE(supports_cached(backend, *g.add_node(get_op("mul"), {z, z}), nullptr));  // another shape
  Attrs last, first;
  last.set("dim", int64_t{-1});
  first.set("dim", int64_t{0});
  EXPECT_TRUE(supports_cached(backend, *g.add_node(get_op("softmax"), {x}, last), nullptr));
  EXPECT_TRUE(supports_cached(backend, *g.add_node(get_op("softmax"), {x}, first), nullptr));  // another attribute
  EXPECT_EQ(backend.asked, 5);
  Node* again = g.add_node(get_op("softmax"), {y}, first);  // same kind as the last: answered from the cache
  EXPECT_TRUE(supports_cached(backend, *again, nullptr));
  EXPECT_EQ(backend.asked, 5);
  EXPECT_TRUE(supports_cached(other_device, *again, nullptr));
  EXPECT_EQ(other_device.asked, 1);
}

TEST(SupportCache, UnsupportedIsAskedEveryTimeWithItsReason) {
  CountingBackend backend(104, "relu");
  Graph g;
  Value* x = g.add_input("x", f32({4, 8}));
  Node* a = g.add_node(get_op("relu"), {x}, {}, "a");
  Node* b = g.add_node(get_op("relu"), {x}, {}, "b");
  std::string why;
  EXPECT_FALSE(supports_cached(backend, *a, &why));
  EXPECT_EQ(why, "no kernel for a");
  EXPECT_FALSE(supports_cached(backend, *b, &why));
  EXPECT_EQ(why, "no kernel for b");  // the reason names its own node
  EXPECT_EQ(backend.asked, 2);
}

TEST(SupportCache, FusedNodesAreNotCached) {
  CountingBackend backend(105);
  Graph g;
  Value* x = g.add_input("x", f32({4, 8}));
  Node* n = g.add_node(get_op("relu"), {x});
  n->body = std::make_shared<Graph>();
  EXPECT_TRUE(supports_cached(backend, *n, nullptr));
  EXPECT_TRUE(supports_cached(backend, *n, nullptr));
  EXPECT_EQ(backend.asked, 2);
}

TEST(SupportCache, StatsCountHitsAskedAndUncacheable) {
  CountingBackend backend(106);
  Graph g;
  Value* x = g.add_input("x", f32({4, 8}));
  const SupportCacheStats before = support_cache_stats();
  EXPECT_TRUE(supports_cached(backend, *g.add_node(get_op("neg"), {x}), nullptr));  // asked
  EXPECT_TRUE(supports_cached(backend, *g.add_node(get_op("neg"), {x}), nullptr));  // a hit
  EXPECT_TRUE(supports_cached(backend, *g.add_node(get_op("neg"), {x}), nullptr));  // a hit
  Node* fused = g.add_node(get_op("neg"), {x});
  fused->body = std::make_shared<Graph>();
  EXPECT_TRUE(supports_cached(backend, *fused, nullptr));  // never cached
  const SupportCacheStats after = support_cache_stats();
  EXPECT_EQ(after.asked - before.asked, 1);
  EXPECT_EQ(after.hits - before.hits, 2);
  EXPECT_EQ(after.uncacheable - before.uncacheable, 1);
  EXPECT_EQ(backend.asked, 2);
}

}  // namespace
}  // namespace kiln
