// The IR text parser: reads the text form written by print_graph
// (ir/printer.h, format in docs/ir.md) back into a Graph.
//
// It checks syntax, names (every %value defined once, before use), op names,
// dtypes, dims and literal contents; it does not check op semantics (arity,
// attributes, inferred types): run verify_graph (ir/verifier.h) for that.
// Hostile text never crashes it: every problem is a kiln::Error whose message
// starts with "line L:C:" and says what was expected.
#pragma once

#include <memory>
#include <string_view>

#include "ir/graph.h"

namespace kiln {

std::unique_ptr<Graph> parse_graph(std::string_view text);

// Limits that keep hostile text from allocating absurd amounts of memory.
inline constexpr int64_t kMaxParsedLiteralElements = int64_t{1} << 24;
inline constexpr int64_t kMaxParsedNumel = int64_t{1} << 48;
inline constexpr size_t kMaxParsedRank = 64;
inline constexpr int kMaxParsedBodyDepth = 32;

}  // namespace kiln
