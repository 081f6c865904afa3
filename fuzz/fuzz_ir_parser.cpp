// Fuzz target for the IR text parser (ir/parser.h) and verifier: every input
// must parse or be rejected with kiln::Error. A graph that parses and
// verifies must print (ir/printer.h) to text that parses again to the same
// text: a round-trip mismatch is a finding too.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "support/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string printed;
  try {
    auto graph = kiln::parse_graph(text);
    kiln::verify_graph(*graph);
    printed = kiln::print_graph(*graph);
  } catch (const kiln::Error&) {
    return 0;  // rejected with a clear error
  }
  try {
    auto again = kiln::parse_graph(printed);
    if (kiln::print_graph(*again) != printed) {
      std::fprintf(stderr, "IR round trip changed the text:\n%s\n", printed.c_str());
      std::abort();
    }
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "printed IR does not parse again: %s\n%s\n", e.what(), printed.c_str());
    std::abort();
  }
  return 0;
}
