// Fuzz target for the safetensors reader (runtime/artifact_safetensors.h):
// every input must parse or be rejected with kiln::Error; a parsed file's
// tensors must lie inside its bytes.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/artifact_safetensors.h"
#include "support/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto file = kiln::SafetensorsFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz");
    // Each tensor lies in the file: reading its first and last bytes must be safe.
    volatile uint8_t sink = 0;
    for (const kiln::SafetensorsEntry& e : file->tensors())
      if (!e.data.empty()) sink = sink ^ e.data.front() ^ e.data.back();
  } catch (const kiln::Error&) {
  }
  return 0;
}
