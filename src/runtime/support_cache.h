// Whether a backend can lower a node, remembered per node kind. A backend
// answers supports() by lowering the node (on CUDA: a cuDNN plan, a cuBLASLt
// heuristic query), and the import asks it for every node of a graph, so a
// model of repeated layers asked the same question once per layer. The answer
// depends only on the node's op, attributes and value types (and literal
// bytes), so a "yes" is kept under that key, process-wide and per device.
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph.h"
#include "runtime/backend.h"

namespace kiln {

// backend.supports(node, reason), answered from the cache when a node of the
// same kind was found supported before on the same device. Only "supported" is
// kept (a reason may name the node); fused nodes (with a body) and nodes
// reading large literals are not cached.
bool supports_cached(const Backend& backend, const Node& node, std::string* reason);

// How supports_cached has answered since the process started: from the cache,
// by asking the backend for a cacheable kind, and by asking for a node that is
// never cached. For benchmarks (bench/import_stage_split.py).
struct SupportCacheStats {
  int64_t hits = 0;
  int64_t asked = 0;
  int64_t uncacheable = 0;
};
SupportCacheStats support_cache_stats();

}  // namespace kiln
