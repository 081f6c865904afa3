// supports_cached: Backend::supports remembered per node kind (support_cache.h).
#include "runtime/support_cache.h"

#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_set>

#include "ir/attr.h"
#include "ops/op_def.h"

namespace kiln {

namespace {

constexpr size_t kMaxLiteralBytes = 64;  // larger literals make the node uncached
constexpr size_t kMaxEntries = 16384;    // then the cache starts over

// Everything a backend's answer depends on: the device, the op, each input's
// kind, type and (for a literal) bytes, the attributes and the output types.
std::optional<std::string> kind_key(const Backend& backend, const Node& node) {
  if (node.body) return std::nullopt;
  std::ostringstream key;
  const Device device = backend.device();
  key << static_cast<int>(device.kind) << ':' << device.index << '|' << node.op->name << '(';
  for (const Value* v : node.inputs) {
    key << static_cast<int>(v->kind) << ':' << to_string(v->type);
    if (v->kind == ValueKind::literal) {
      if (v->literal_data.size() > kMaxLiteralBytes) return std::nullopt;
      key << '=';
      for (uint8_t b : v->literal_data) key << std::hex << static_cast<int>(b) << std::dec << '.';
    }
    key << ',';
  }
  key << ")|";
  for (const auto& [name, value] : node.attrs.items()) key << name << '=' << attr_to_string(value) << ',';
  key << '|';
  for (const Value* v : node.outputs) key << to_string(v->type) << ',';
  return key.str();
}

std::mutex& cache_mutex() {
  static std::mutex m;
  return m;
}

std::unordered_set<std::string>& supported_kinds() {
  static std::unordered_set<std::string> kinds;
  return kinds;
}

SupportCacheStats& stats() {
  static SupportCacheStats s;
  return s;
}

}  // namespace

SupportCacheStats support_cache_stats() {
  std::lock_guard<std::mutex> lock(cache_mutex());
  return stats();
}

bool supports_cached(const Backend& backend, const Node& node, std::string* reason) {
  std::optional<std::string> key = kind_key(backend, node);
  if (!key) {
    {
      std::lock_guard<std::mutex> lock(cache_mutex());
      ++stats().uncacheable;
    }
    return backend.supports(node, reason);
  }
  {
    std::lock_guard<std::mutex> lock(cache_mutex());
    if (supported_kinds().count(*key)) {
      ++stats().hits;
      return true;
    }
    ++stats().asked;
  }
  // Asked outside the lock (it may lower for milliseconds). Only "yes" is kept: a reason can name the node.
  if (!backend.supports(node, reason)) return false;
  std::lock_guard<std::mutex> lock(cache_mutex());
  if (supported_kinds().size() >= kMaxEntries) supported_kinds().clear();
  supported_kinds().insert(std::move(*key));
  return true;
}

}  // namespace kiln
