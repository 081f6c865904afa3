// The artifact reader: checks a whole file against Note [Artifact format]
// (runtime/artifact_format.h) before trusting any of it, then decodes the
// metadata, the weight table and the graph.
#include "runtime/artifact_reader.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "ir/parser.h"
#include "ir/verifier.h"
#include "runtime/artifact_format.h"
#include "support/error.h"

namespace kiln {

namespace {

using namespace artifact;

template <typename... Parts>
[[noreturn]] void corrupt(Parts&&... parts) {
  fail(ErrorKind::corrupt_file, "corrupt kiln artifact: ", std::forward<Parts>(parts)...);
}

uint64_t read_u64_at(std::span<const uint8_t> b, size_t at) {
  ByteReader r(b.subspan(at, 8), "header");
  return r.u64();
}

uint32_t read_u32_at(std::span<const uint8_t> b, size_t at) {
  ByteReader r(b.subspan(at, 4), "header");
  return r.u32();
}

// Bytes spanned by a strided layout, or -1 when it does not fit the limits.
int64_t checked_storage_bytes(const TensorType& t) {
  unsigned __int128 last = 0;
  for (size_t i = 0; i < t.rank(); ++i) {
    if (t.dims[i] == 0) return 0;
    last += static_cast<unsigned __int128>(t.dims[i] - 1) * static_cast<unsigned __int128>(t.strides[i]);
  }
  unsigned __int128 bytes = (last + 1) * dtype_size(t.dtype);
  if (bytes > static_cast<unsigned __int128>(kMaxParsedNumel) * 8) return -1;
  return static_cast<int64_t>(bytes);
}

}  // namespace

std::shared_ptr<const Artifact> Artifact::open(const std::string& path, const ArtifactReadOptions& options) {
  std::shared_ptr<Artifact> a(new Artifact());
  a->map_ = std::make_unique<MappedFile>(path);
  a->bytes_ = a->map_->bytes();
  try {
    a->parse(options);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::corrupt_file) throw;
    fail(ErrorKind::corrupt_file, e.what(), " (file '", path, "')");
  }
  return a;
}

std::shared_ptr<const Artifact> Artifact::from_bytes(std::vector<uint8_t> bytes, const ArtifactReadOptions& options) {
  std::shared_ptr<Artifact> a(new Artifact());
  a->owned_ = std::move(bytes);
  a->bytes_ = a->owned_;
  a->parse(options);
  return a;
}

void Artifact::parse(const ArtifactReadOptions& options) {
  const std::span<const uint8_t> file = bytes_;
  // ---- header
  if (file.size() < kHeaderSize)
    corrupt("the file is ", file.size(), " bytes, shorter than the ", kHeaderSize, "-byte header (truncated?)");
  if (std::memcmp(file.data(), kMagic, sizeof kMagic) != 0) corrupt("bad magic: this is not a kiln artifact");
  version_ = read_u32_at(file, 8);
  if (version_ != kFormatVersion)
    corrupt("format version ", version_, " is not supported (this kiln reads version ", kFormatVersion, ")");
  if (checksum(file.first(56)) != read_u64_at(file, 56)) corrupt("header checksum mismatch");
  const uint32_t count = read_u32_at(file, 12);
  const uint64_t declared_size = read_u64_at(file, 16);
  if (declared_size > file.size())
    corrupt("the header says ", declared_size, " bytes but the file has ", file.size(), " (truncated)");
  if (declared_size < file.size())
    corrupt("the header says ", declared_size, " bytes but the file has ", file.size(), " (trailing bytes)");
  for (size_t i = 32; i < 56; ++i)
    if (file[i] != 0) corrupt("reserved header bytes are not zero");
  if (count == 0 || count > kMaxSections) corrupt("section count ", count, " is out of range (1..", kMaxSections, ")");
  const uint64_t table_end = kHeaderSize + kTableEntrySize * count;
  if (table_end > file.size()) corrupt("the section table runs past the end of the file");
  if (checksum(file.subspan(kHeaderSize, table_end - kHeaderSize)) != read_u64_at(file, 24))
    corrupt("section table checksum mismatch");

  // ---- sections: bounds, order, alignment, zero gaps, checksums
  std::map<SectionKind, std::span<const uint8_t>> section;
  ByteReader table(file.subspan(kHeaderSize, table_end - kHeaderSize), "section table");
  uint64_t end = table_end;
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t kind_raw = table.u32();
    const uint32_t reserved = table.u32();
    const uint64_t offset = table.u64(), size = table.u64(), hash = table.u64();
    const auto kind = static_cast<SectionKind>(kind_raw);
    const std::string name = str_cat("section ", i, " (", section_name(kind), ")");
    if (section_name(kind) == "unknown") corrupt(name, ": unknown kind ", kind_raw);
    if (reserved != 0) corrupt(name, ": reserved field is not zero");
    if (section.count(kind)) corrupt(name, ": a second section of this kind");
    const uint64_t alignment = kind == SectionKind::weight_data ? kWeightDataAlignment : kSectionAlignment;
    if (offset % alignment != 0) corrupt(name, ": offset ", offset, " is not a multiple of ", alignment);
    if (offset < end) corrupt(name, ": offset ", offset, " overlaps what comes before it (ends at ", end, ")");
    if (offset > file.size() || size > file.size() - offset)
      corrupt(name, ": bytes ", offset, "+", size, " run past the end of the file (", file.size(), " bytes)");
    for (uint64_t j = end; j < offset; ++j)
      if (file[j] != 0) corrupt("padding byte ", j, " before ", name, " is not zero");
    auto bytes = file.subspan(offset, size);
    if ((kind != SectionKind::weight_data || options.verify_weights) && checksum(bytes) != hash)
      corrupt(name, ": checksum mismatch");
    section[kind] = bytes;
    sections_.push_back({std::string(section_name(kind)), offset, size});
    end = offset + size;
  }
  if (end != file.size()) corrupt("bytes ", end, "..", file.size(), " after the last section belong to no section");
  for (SectionKind k : {SectionKind::metadata, SectionKind::graph, SectionKind::weight_table})
    if (!section.count(k)) corrupt("the ", section_name(k), " section is missing");

  // ---- metadata
  {
    ByteReader r(section[SectionKind::metadata], "metadata section");
    uint32_t n = r.u32();
    if (n > r.remaining() / 8) r.fail_here(str_cat(n, " entries cannot fit in ", r.remaining(), " bytes"));
    for (uint32_t i = 0; i < n; ++i) {
      std::string k = r.str();
      metadata_[k] = r.str();
    }
    if (r.remaining() != 0) r.fail_here("unexpected bytes after the last entry");
  }
  auto text = [](std::span<const uint8_t> b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); };
  graph_text_ = text(section[SectionKind::graph]);
  if (section.count(SectionKind::description)) description_ = text(section[SectionKind::description]);

  // ---- weight table
  std::span<const uint8_t> data;
  if (section.count(SectionKind::weight_data)) {
    data = section[SectionKind::weight_data];
    has_weight_data_ = true;
  }
  {
    ByteReader r(section[SectionKind::weight_table], "weight table");
    constexpr size_t kMinEntry = 4 + 4 + 1 + 1 + 4 + 8 + 8;
    uint32_t n = r.u32();
    if (n > r.remaining() / kMinEntry) r.fail_here(str_cat(n, " weights cannot fit in ", r.remaining(), " bytes"));
    std::set<std::string> keys, names;
    for (uint32_t i = 0; i < n; ++i) {
      ArtifactWeight w;
      w.key = r.str();
      w.name = r.str();
      const std::string what = str_cat("weight ", i, " ('", w.key, "')");
      if (!keys.insert(w.key).second) r.fail_here(what + ": duplicate key");
      if (!names.insert(w.name).second) r.fail_here(what + ": duplicate name '" + w.name + "'");
      uint8_t dtype = r.u8();
      if (dtype >= std::size(kAllDTypes)) r.fail_here(str_cat(what, ": unknown dtype ", int(dtype)));
      uint8_t stored = r.u8();
      if (stored > 1) r.fail_here(str_cat(what, ": bad stored flag ", int(stored)));
      uint32_t rank = r.u32();
      if (rank > kMaxParsedRank || rank > r.remaining() / 16)
        r.fail_here(str_cat(what, ": rank ", rank, " is out of range"));
      Dims dims(rank), strides(rank);
      for (auto& d : dims) d = r.i64();
      for (auto& s : strides) s = r.i64();
      unsigned __int128 numel = 1;
      for (uint32_t j = 0; j < rank; ++j) {
        if (dims[j] < 0 || dims[j] > kMaxParsedNumel || strides[j] < 0 || strides[j] > kMaxParsedNumel)
          r.fail_here(str_cat(what, ": dim or stride ", j, " is out of range"));
        // Dims of size 0 count as 1 here, as they do in contiguous strides.
        numel = std::min<unsigned __int128>(numel * static_cast<uint64_t>(std::max<int64_t>(dims[j], 1)),
                                            uint64_t{1} << 63);
      }
      // Bounded product of the dims (zeros as ones), so that nothing computed
      // from them (contiguous strides, sizes) can overflow.
      if (numel > static_cast<unsigned __int128>(kMaxParsedNumel)) r.fail_here(what + ": the tensor is too large");
      w.type = TensorType(kAllDTypes[dtype], dims, strides);
      const int64_t expect = checked_storage_bytes(w.type);
      if (expect < 0) r.fail_here(what + ": the tensor is too large");
      const uint64_t offset = r.u64();
      w.bytes = r.u64();
      if (w.bytes != static_cast<uint64_t>(expect))
        r.fail_here(str_cat(what, ": ", w.bytes, " bytes, but ", to_string(w.type), " spans ", expect));
      if (stored) {
        if (offset % kWeightAlignment != 0) r.fail_here(str_cat(what, ": offset ", offset, " is not aligned"));
        if (offset > data.size() || w.bytes > data.size() - offset)
          r.fail_here(str_cat(what, ": bytes ", offset, "+", w.bytes, " run past the weight data (", data.size(),
                              " bytes)"));
        w.data = data.data() + offset;
      } else if (offset != 0) {
        r.fail_here(what + ": offset set for a weight with no data");
      }
      weights_.push_back(std::move(w));
    }
    if (r.remaining() != 0) r.fail_here("unexpected bytes after the last weight");
  }

  // ---- graph
  try {
    graph_ = parse_graph(graph_text_);
    verify_graph(*graph_);
  } catch (const Error& e) {
    corrupt("graph section: ", e.what());
  }
  std::map<std::string, const ArtifactWeight*> by_key;
  for (const ArtifactWeight& w : weights_) by_key[w.key] = &w;
  std::set<std::string> used;
  for (const Value* v : graph_->weights()) {
    auto it = by_key.find(v->weight_key);
    if (it == by_key.end()) corrupt("the graph's weight '", v->weight_key, "' is not in the weight table");
    if (!(it->second->type == v->type))
      corrupt("weight '", v->weight_key, "': the table says ", to_string(it->second->type), ", the graph ",
              to_string(v->type));
    used.insert(v->weight_key);
  }
  for (const ArtifactWeight& w : weights_)
    if (!used.count(w.key)) corrupt("weight table entry '", w.key, "' is not a weight of the graph");
}

}  // namespace kiln
