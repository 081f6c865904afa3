// Fuzz target for the artifact loader (runtime/artifact_reader.h): every input
// must either load or be rejected with kiln::Error; anything else (a crash, a
// sanitizer report, another exception) is a finding. Built with
// KILN_FUZZ_COMPILE_LOADED (the ctest replay), a loaded artifact is also
// compiled into an executable (LoadedProgram), which needs the backends the
// libFuzzer build leaves out.
//
// Each input is tried twice: as given, and with its checksums recomputed
// (header, table and every section the table points at), so that mutations
// reach the metadata, weight table and graph decoders instead of stopping
// at the first checksum mismatch.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/artifact_format.h"
#include "runtime/artifact_reader.h"
#include "support/error.h"

namespace {

using namespace kiln::artifact;

uint64_t get(const std::vector<uint8_t>& b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | b[at + i];
  return v;
}

void put(std::vector<uint8_t>& b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// Rewrites the checksums the reader checks, where the bytes to hash are in
// range; leaves anything out of range as it is (the reader rejects it).
void fix_checksums(std::vector<uint8_t>& b) {
  if (b.size() < kHeaderSize) return;
  const uint64_t count = get(b, 12, 4);
  if (count > kMaxSections || kHeaderSize + count * kTableEntrySize > b.size()) return;
  for (uint64_t i = 0; i < count; ++i) {
    const size_t entry = kHeaderSize + i * kTableEntrySize;
    const uint64_t offset = get(b, entry + 8, 8), size = get(b, entry + 16, 8);
    if (offset <= b.size() && size <= b.size() - offset) put(b, entry + 24, checksum(std::span(b).subspan(offset, size)));
  }
  put(b, 24, checksum(std::span(b).subspan(kHeaderSize, count * kTableEntrySize)));
  put(b, 56, checksum(std::span(b).first(56)));
}

void load(std::vector<uint8_t> bytes) {
  try {
    auto artifact = kiln::Artifact::from_bytes(std::move(bytes));
#if KILN_FUZZ_COMPILE_LOADED
    kiln::LoadedProgram program(artifact);
    (void)program.executable().describe();
#endif
  } catch (const kiln::Error&) {
    // a clear rejection: what the loader must do with a bad file
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  load(bytes);
  fix_checksums(bytes);
  load(std::move(bytes));
  return 0;
}
