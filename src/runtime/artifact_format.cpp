// The artifact format's shared pieces: section names, the checksum, and the
// bounds-checked byte reader and writer (Note [Artifact format]).
#include "runtime/artifact_format.h"

#include <cstring>

#include "support/error.h"

namespace kiln::artifact {

std::string_view section_name(SectionKind kind) {
  switch (kind) {
    case SectionKind::metadata: return "metadata";
    case SectionKind::graph: return "graph";
    case SectionKind::description: return "description";
    case SectionKind::weight_table: return "weight table";
    case SectionKind::weight_data: return "weight data";
  }
  return "unknown";
}

namespace {
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

uint64_t load_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
}  // namespace

void Hasher::word(const uint8_t* p) { h_ = (h_ ^ load_u64(p)) * kFnvPrime; }

void Hasher::feed(std::span<const uint8_t> bytes) {
  total_ += bytes.size();
  size_t i = 0;
  while (carried_ > 0 && i < bytes.size()) {
    carry_[carried_ & 7] = bytes[i++];  // carried_ < 8 here
    ++carried_;
    if (carried_ == 8) {
      word(carry_);
      carried_ = 0;
    }
  }
  if (carried_ > 0) return;  // the piece ended inside the carried word
  for (; i + 8 <= bytes.size(); i += 8) word(bytes.data() + i);
  carried_ = bytes.size() - i;  // < 8
  std::memcpy(carry_, bytes.data() + i, carried_);
}

uint64_t Hasher::finish() const {
  uint64_t h = h_;
  for (size_t i = 0; i < carried_; ++i) h = (h ^ carry_[i]) * kFnvPrime;
  return h ^ total_;
}

uint64_t checksum(std::span<const uint8_t> bytes) {
  Hasher h;
  h.feed(bytes);
  return h.finish();
}

void ByteWriter::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void ByteWriter::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void ByteWriter::str(std::string_view s) {
  KILN_CHECK(s.size() <= UINT32_MAX, "artifact: string of ", s.size(), " bytes is too long to save");
  u32(static_cast<uint32_t>(s.size()));
  bytes_.insert(bytes_.end(), s.begin(), s.end());
}

void ByteWriter::put_u64_at(size_t offset, uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes_.at(offset + i) = static_cast<uint8_t>(v >> (8 * i));
}

void ByteReader::fail_here(std::string_view message) const {
  fail(ErrorKind::corrupt_file, "corrupt kiln artifact: ", what_, " at byte ", pos_, ": ", message);
}

std::span<const uint8_t> ByteReader::take(size_t n) {
  if (n > remaining())
    fail_here(str_cat("needs ", n, " more bytes but only ", remaining(), " remain (truncated?)"));
  auto out = bytes_.subspan(pos_, n);
  pos_ += n;
  return out;
}

uint8_t ByteReader::u8() { return take(1)[0]; }

uint32_t ByteReader::u32() {
  auto b = take(4);
  return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
}

uint64_t ByteReader::u64() { return load_u64(take(8).data()); }

std::string ByteReader::str() {
  uint32_t n = u32();
  auto b = take(n);  // checked against the bytes left before anything is allocated
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

}  // namespace kiln::artifact
