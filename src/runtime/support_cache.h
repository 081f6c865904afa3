// Whether a backend can lower a node, remembered per node kind. A backend
// answers supports() by lowering the node (on CUDA: a cuDNN plan, a cuBLASLt
// heuristic query), and the import asks it for every node of a graph, so a
// model of repeated layers asked the same question once per layer. The answer
// depends only on the node's op, attributes and value types (and literal
// bytes), so a "yes" is kept under that key, process-wide and per device.
#pragma once

#include <string>

#include "ir/graph.h"
#include "runtime/backend.h"

namespace kiln {

// backend.supports(node, reason), answered from the cache when a node of the
// same kind was found supported before on the same device. Only "supported" is
// kept (a reason may name the node); fused nodes (with a body) and nodes
// reading large literals are not cached.
bool supports_cached(const Backend& backend, const Node& node, std::string* reason);

}  // namespace kiln
