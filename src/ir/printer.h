// The IR text printer: a readable, exact text form of a Graph (docs/ir.md).
// print_graph and parse_graph (ir/parser.h) round-trip exactly: parsing the
// printed text gives a structurally equal graph that prints the same text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ir/dtype.h"

namespace kiln {

class Graph;
struct Node;

// The whole graph, "graph { ... }", ending with a newline.
std::string print_graph(const Graph& graph);
// One node as it appears inside a graph (bodies included), without indentation.
std::string print_node(const Node& node);

// Pieces shared with the parser and handy in error messages.
// A value reference: %name, or %"quoted" when the name is not a bare name.
std::string value_ref(std::string_view name);
// True for non-empty names made only of [A-Za-z0-9_.].
bool is_bare_name(std::string_view name);
// "text" with \" \\ \n \t \r and \xHH escapes for other control bytes.
std::string quote_string(std::string_view s);
// One literal element read from `p`: exact integers, shortest round-trip
// floats (f16/bf16 via their exact float value), nan/-nan for the canonical
// NaN and 0x<hex bits> for any other NaN, true/false for bool 0/1.
std::string literal_element_to_string(const uint8_t* p, DType dtype);
// The bits "nan" (or "-nan") stands for in a literal of a floating dtype.
uint64_t canonical_nan_bits(DType dtype, bool negative);

}  // namespace kiln
