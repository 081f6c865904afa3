// The kiln artifact file: one versioned file holding a compiled program (the
// optimized graph as IR text) and, optionally, its weights laid out so that a
// loader can map them. Shared by the writer (runtime/artifact_writer.h) and
// the reader (runtime/artifact_reader.h); this file is the format's
// definition, read it before changing either side.
//
// Note [Artifact format]
//   All integers are little-endian. The file is
//     header      64 bytes at offset 0 (layout below)
//     table       section_count entries of 32 bytes, right after the header
//     sections    in table order, each starting at an offset that is a
//                 multiple of its alignment (64 bytes; the weight data 4096,
//                 a page, so that it can be mapped and its weights are
//                 aligned in memory); the gaps between sections are zeros
//   Header: magic "KILNART\0" (8) | u32 format version | u32 section count |
//     u64 file size | u64 table checksum | 24 reserved zero bytes |
//     u64 header checksum (over bytes 0..56).
//   Table entry: u32 kind | u32 reserved (0) | u64 offset | u64 size |
//     u64 checksum of the section's bytes.
//   Sections (kinds below): metadata (u32 count, then count key/value
//   strings), graph (IR text, ir/printer.h), description (the executable's
//   kernel list and memory plan, as text, for people), weight table (u32
//   count, then per weight: key, name, u8 dtype, u8 stored, u32 rank, rank
//   i64 dims, rank i64 strides, u64 offset in the weight data, u64 bytes),
//   weight data (each weight at a multiple of 64 bytes).
//   A string is a u32 length then its bytes.
//
//   Every byte of a valid file is covered: the header and table by their
//   checksums, each section by its own, the gaps by being zero. So a
//   truncated or corrupted file is always detected (up to checksum
//   collisions) and named in the error; the format version changes whenever
//   a reader of the old version could misread a new file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::artifact {

inline constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'A', 'R', 'T', '\0'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint64_t kHeaderSize = 64;
inline constexpr uint64_t kTableEntrySize = 32;
inline constexpr uint64_t kSectionAlignment = 64;
inline constexpr uint64_t kWeightDataAlignment = 4096;  // the weight data section's start (a page)
inline constexpr uint64_t kWeightAlignment = 64;        // each weight inside it
inline constexpr uint32_t kMaxSections = 16;

enum class SectionKind : uint32_t { metadata = 1, graph = 2, description = 3, weight_table = 4, weight_data = 5 };

std::string_view section_name(SectionKind kind);  // "graph", ...; "unknown" otherwise

// The checksum: 64-bit FNV-1a over the little-endian 64-bit words of the
// byte stream, then its last (size % 8) bytes one at a time, xor the size
// (word-wise so that hashing the weights is cheap). Hasher takes the stream
// in pieces of any size.
class Hasher {
 public:
  void feed(std::span<const uint8_t> bytes);
  uint64_t finish() const;

 private:
  void word(const uint8_t* p);
  uint64_t h_ = 0xcbf29ce484222325ull;
  uint64_t total_ = 0;
  uint8_t carry_[8] = {};
  size_t carried_ = 0;
};

uint64_t checksum(std::span<const uint8_t> bytes);

inline uint64_t align_up(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// Appends little-endian fields to a byte buffer.
class ByteWriter {
 public:
  void u8(uint8_t v) { bytes_.push_back(v); }
  void u32(uint32_t v);
  void u64(uint64_t v);
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void str(std::string_view s);
  void raw(std::span<const uint8_t> b) { bytes_.insert(bytes_.end(), b.begin(), b.end()); }
  void put_u64_at(size_t offset, uint64_t v);
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Reads little-endian fields from a byte range, every read bounds-checked:
// running past the end throws kiln::Error(corrupt_file) naming `what` (the
// section being read) and the offset.
class ByteReader {
 public:
  ByteReader(std::span<const uint8_t> bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}
  uint8_t u8();
  uint32_t u32();
  uint64_t u64();
  int64_t i64() { return static_cast<int64_t>(u64()); }
  std::string str();
  size_t remaining() const { return bytes_.size() - pos_; }
  size_t position() const { return pos_; }
  [[noreturn]] void fail_here(std::string_view message) const;

 private:
  std::span<const uint8_t> take(size_t n);
  std::span<const uint8_t> bytes_;
  std::string what_;
  size_t pos_ = 0;
};

}  // namespace kiln::artifact
