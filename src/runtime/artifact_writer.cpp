// The artifact writer (Note [Artifact format] in runtime/artifact_format.h):
// lays out the header, table and sections in memory (all small but the
// weights), then streams the weights from the executable's bound memory
// (through a bounded host staging buffer when that memory is on a device).
#include "runtime/artifact_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "ir/graph.h"
#include "ir/printer.h"
#include "runtime/artifact_format.h"
#include "runtime/backend.h"
#include "runtime/cuda_architecture.h"
#include "runtime/executable.h"
#include "support/error.h"

namespace kiln {

namespace {

using namespace artifact;

struct Section {
  SectionKind kind;
  std::vector<uint8_t> bytes;                            // small sections
  std::vector<std::pair<const uint8_t*, uint64_t>> pieces;  // weight data: (device source, bytes) at 64-byte steps
  uint64_t size = 0;
  uint64_t offset = 0;
  uint64_t hash = 0;
};

struct WeightToSave {
  std::string key;
  const Value* value;
  const uint8_t* data;  // in the executable's device memory; null when not saved
  uint64_t offset = 0, bytes = 0;
};

std::vector<WeightToSave> collect_weights(const Executable& exe, bool with_data) {
  std::map<std::string, const void*> bound;
  for (const auto& [key, ptr] : exe.bound_weights()) bound[key] = ptr;
  std::vector<WeightToSave> out;
  uint64_t offset = 0;
  for (const std::string& key : exe.weight_keys()) {
    const Value* value = nullptr;
    for (const Value* w : exe.graph().weights())
      if (w->weight_key == key) {
        value = w;
        break;
      }
    KILN_CHECK(value != nullptr, "save_artifact: weight '", key, "' has no value in the graph");
    WeightToSave w{key, value, nullptr};
    w.bytes = static_cast<uint64_t>(value->type.storage_bytes());
    if (with_data) {
      auto it = bound.find(key);
      KILN_CHECK(it != bound.end() && it->second != nullptr, "save_artifact: weight '", key,
                 "' is not bound; bind it (or run the program once) before saving with weights, or save "
                 "without weights");
      w.data = static_cast<const uint8_t*>(it->second);
      offset = align_up(offset, kWeightAlignment);
      w.offset = offset;
      offset += w.bytes;
    }
    out.push_back(std::move(w));
  }
  return out;
}

Section small_section(SectionKind kind, std::vector<uint8_t> bytes) {
  Section s{kind, std::move(bytes), {}};
  s.size = s.bytes.size();
  s.hash = checksum(s.bytes);
  return s;
}

Section text_section(SectionKind kind, const std::string& text) {
  return small_section(kind, std::vector<uint8_t>(text.begin(), text.end()));
}

Section weight_table(const std::vector<WeightToSave>& weights, const ArtifactSaveOptions& options) {
  ByteWriter w;
  w.u32(static_cast<uint32_t>(weights.size()));
  for (const WeightToSave& ws : weights) {
    const TensorType& t = ws.value->type;
    auto name = options.weight_names.find(ws.key);
    w.str(ws.key);
    w.str(name != options.weight_names.end() ? name->second : ws.key);
    w.u8(static_cast<uint8_t>(t.dtype));
    w.u8(ws.data != nullptr ? 1 : 0);
    w.u32(static_cast<uint32_t>(t.rank()));
    for (int64_t d : t.dims) w.i64(d);
    for (int64_t s : t.strides) w.i64(s);
    w.u64(ws.offset);
    w.u64(ws.bytes);
  }
  return small_section(SectionKind::weight_table, std::move(w.bytes()));
}

// Hashes the weights exactly as the reader will see them: the data section's
// bytes, padding zeros included.
Section weight_data(const std::vector<WeightToSave>& weights) {
  Section s{SectionKind::weight_data, {}, {}};
  uint64_t size = 0;
  for (const WeightToSave& w : weights) {
    if (w.data == nullptr) continue;
    s.pieces.emplace_back(w.data, w.bytes);
    size = w.offset + w.bytes;
  }
  s.size = size;
  return s;
}

void write_all(std::FILE* f, const void* data, uint64_t size, const std::string& path) {
  if (size == 0) return;
  if (std::fwrite(data, 1, size, f) != size)
    fail(ErrorKind::runtime, "save_artifact: cannot write '", path, "': ", std::strerror(errno));
}

void write_zeros(std::FILE* f, uint64_t n, const std::string& path) {
  static const uint8_t zeros[4096] = {};
  while (n > 0) {
    uint64_t k = std::min<uint64_t>(n, sizeof zeros);
    write_all(f, zeros, k, path);
    n -= k;
  }
}

// Hands the weights' bytes to the host: in place on the CPU; from a device
// chunk by chunk through one reusable staging buffer of at most kStagingBytes
// (so a save never holds more than that of the model on the host).
class WeightReader {
 public:
  explicit WeightReader(Device device) : device_(device) {}

  // Calls fn(std::span<const uint8_t>) on consecutive host spans covering `bytes` at `data`.
  template <typename Fn>
  void read(const uint8_t* data, uint64_t bytes, Fn&& fn) {
    if (device_.kind == DeviceKind::cpu) {
      fn(std::span(data, bytes));
      return;
    }
    if (!backend_) backend_ = make_backend(device_);
    for (uint64_t at = 0; at < bytes;) {
      const uint64_t n = std::min(bytes - at, kStagingBytes);
      if (staging_.size() < n) staging_.resize(n);
      backend_->download(staging_.data(), data + at, n);
      fn(std::span<const uint8_t>(staging_.data(), n));
      at += n;
    }
  }

 private:
  static constexpr uint64_t kStagingBytes = uint64_t{64} << 20;
  Device device_;
  std::unique_ptr<Backend> backend_;  // made at the first device read
  std::vector<uint8_t> staging_;
};

// The weight data section's checksum, computed from the weights where they
// are bound (with the zero padding between them), as the reader will see the bytes.
uint64_t weight_data_hash(const Section& s, WeightReader& reader) {
  static const uint8_t zeros[kWeightAlignment] = {};
  Hasher hasher;
  uint64_t at = 0;
  for (const auto& [data, bytes] : s.pieces) {
    uint64_t start = align_up(at, kWeightAlignment);
    hasher.feed(std::span(zeros, start - at));
    reader.read(data, bytes, [&](std::span<const uint8_t> chunk) { hasher.feed(chunk); });
    at = start + bytes;
  }
  return hasher.finish();
}

// The executable's graph with the program's outputs (ArtifactSaveOptions::outputs).
std::unique_ptr<Graph> graph_to_save(const Graph& graph, const std::vector<size_t>& order) {
  std::unique_ptr<Graph> g = graph.clone();
  if (order.empty()) return g;
  std::vector<Value*> outputs;
  for (size_t k : order) {
    KILN_CHECK(k < g->outputs().size(), "save_artifact: output index ", k, " is out of range (the program has ",
               g->outputs().size(), " outputs)");
    outputs.push_back(g->outputs()[k]);
  }
  g->set_outputs(std::move(outputs));
  return g;
}

}  // namespace

void save_artifact(const Executable& exe, const std::string& path, const ArtifactSaveOptions& options) {
  std::vector<WeightToSave> weights = collect_weights(exe, options.weights);
  WeightReader reader(exe.device());

  ByteWriter meta;
  std::map<std::string, std::string> entries = options.metadata;
  entries.emplace("producer", "kiln");
  entries["device"] = to_string(exe.device());
  // Kernels are generated again at load for the GPU at hand; the file records
  // the architecture it was built and checked on, the least a loader must have.
  if (exe.device().kind == DeviceKind::cuda) entries[kCudaArchitectureKey] = make_backend(exe.device())->architecture();
  if (exe.math() != MathOptions{}) entries[kMathKey] = to_string(exe.math());
  meta.u32(static_cast<uint32_t>(entries.size()));
  for (const auto& [k, v] : entries) {
    meta.str(k);
    meta.str(v);
  }

  std::vector<Section> sections;
  sections.push_back(small_section(SectionKind::metadata, std::move(meta.bytes())));
  sections.push_back(text_section(SectionKind::graph, print_graph(*graph_to_save(exe.graph(), options.outputs))));
  sections.push_back(text_section(SectionKind::description, exe.describe()));
  sections.push_back(weight_table(weights, options));
  if (options.weights) {
    sections.push_back(weight_data(weights));
    sections.back().hash = weight_data_hash(sections.back(), reader);
  }

  uint64_t offset = kHeaderSize + kTableEntrySize * sections.size();
  for (Section& s : sections) {
    offset = align_up(offset, s.kind == SectionKind::weight_data ? kWeightDataAlignment : kSectionAlignment);
    s.offset = offset;
    offset += s.size;
  }
  const uint64_t file_size = offset;

  ByteWriter table;
  for (const Section& s : sections) {
    table.u32(static_cast<uint32_t>(s.kind));
    table.u32(0);
    table.u64(s.offset);
    table.u64(s.size);
    table.u64(s.hash);
  }
  ByteWriter header;
  header.raw(std::span(reinterpret_cast<const uint8_t*>(kMagic), sizeof kMagic));
  header.u32(kFormatVersion);
  header.u32(static_cast<uint32_t>(sections.size()));
  header.u64(file_size);
  header.u64(checksum(table.bytes()));
  for (int i = 0; i < 3; ++i) header.u64(0);
  header.u64(checksum(std::span(header.bytes()).first(56)));

  const std::string tmp = path + ".tmp";
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(tmp.c_str(), "wb"), &std::fclose);
  if (!f) fail(ErrorKind::runtime, "save_artifact: cannot create '", tmp, "': ", std::strerror(errno));
  try {
    write_all(f.get(), header.bytes().data(), header.bytes().size(), tmp);
    write_all(f.get(), table.bytes().data(), table.bytes().size(), tmp);
    uint64_t at = kHeaderSize + table.bytes().size();
    for (const Section& s : sections) {
      write_zeros(f.get(), s.offset - at, tmp);
      at = s.offset;
      if (s.kind != SectionKind::weight_data) {
        write_all(f.get(), s.bytes.data(), s.size, tmp);
        at += s.size;
        continue;
      }
      uint64_t local = 0;
      for (const auto& [data, bytes] : s.pieces) {
        uint64_t start = align_up(local, kWeightAlignment);
        write_zeros(f.get(), start - local, tmp);
        reader.read(data, bytes,
                    [&](std::span<const uint8_t> chunk) { write_all(f.get(), chunk.data(), chunk.size(), tmp); });
        local = start + bytes;
      }
      at += local;
    }
    if (std::fflush(f.get()) != 0)
      fail(ErrorKind::runtime, "save_artifact: cannot write '", tmp, "': ", std::strerror(errno));
    std::FILE* raw = f.release();
    if (std::fclose(raw) != 0)
      fail(ErrorKind::runtime, "save_artifact: cannot write '", tmp, "': ", std::strerror(errno));
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      fail(ErrorKind::runtime, "save_artifact: cannot rename '", tmp, "' to '", path, "': ", std::strerror(errno));
  } catch (...) {
    f.reset();
    std::remove(tmp.c_str());
    throw;
  }
}

}  // namespace kiln
