// Reading an artifact (Note [Artifact format] in runtime/artifact_format.h)
// and turning it back into a runnable program.
//
// Artifact::open maps the file and checks all of it before anything else
// reads it: magic, version, the header and table checksums, every section's
// bounds, alignment and checksum, zero gaps, then the metadata, the weight
// table (every count and size checked against the bytes that hold it before
// anything is allocated) and the graph (parsed and verified, its weights
// matched against the table). Any problem is kiln::Error(corrupt_file) naming
// the part at fault; hostile input never crashes, hangs or allocates by an
// unchecked field.
//
// LoadedProgram is the owner object: the Executable binds the stored weights
// by pointer into the mapping, and LoadedProgram keeps the mapping alive as
// long as the executable.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/allocator.h"
#include "runtime/executable.h"
#include "runtime/mapped_file.h"

namespace kiln {

struct ArtifactWeight {
  std::string key;   // the graph's weight key
  std::string name;  // the name users know it by (e.g. a state-dict name)
  TensorType type;
  const void* data = nullptr;  // into the artifact's bytes; null when the file holds no data for it
  uint64_t bytes = 0;
};

struct ArtifactReadOptions {
  // Hashes the weight data too (touches every page once). The other sections
  // are always checked.
  bool verify_weights = true;
};

class Artifact {
 public:
  static std::shared_ptr<const Artifact> open(const std::string& path, const ArtifactReadOptions& options = {});
  // From bytes in memory (tests, fuzzing); the artifact keeps them.
  static std::shared_ptr<const Artifact> from_bytes(std::vector<uint8_t> bytes,
                                                    const ArtifactReadOptions& options = {});

  uint32_t format_version() const { return version_; }
  uint64_t file_size() const { return bytes_.size(); }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& graph_text() const { return graph_text_; }
  const std::string& description() const { return description_; }
  const Graph& graph() const { return *graph_; }
  const std::vector<ArtifactWeight>& weights() const { return weights_; }
  bool has_weight_data() const { return has_weight_data_; }

  struct SectionInfo {
    std::string name;
    uint64_t offset, size;
  };
  const std::vector<SectionInfo>& sections() const { return sections_; }

 private:
  Artifact() = default;
  void parse(const ArtifactReadOptions& options);

  std::unique_ptr<MappedFile> map_;
  std::vector<uint8_t> owned_;
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  std::map<std::string, std::string> metadata_;
  std::string graph_text_, description_;
  std::unique_ptr<Graph> graph_;
  std::vector<ArtifactWeight> weights_;
  bool has_weight_data_ = false;
  std::vector<SectionInfo> sections_;
};

// An Executable made from an artifact, with the artifact kept alive as long
// as the executable (its stored weights are bound by pointer into it).
class LoadedProgram {
 public:
  // Compiles the artifact's graph for `device` (the graph is already
  // optimized; no passes run) and binds every stored weight: in place on the
  // CPU, uploaded from the mapping into device buffers on CUDA. A CUDA device
  // with no usable CUDA is kiln::Error(unsupported) saying why.
  explicit LoadedProgram(std::shared_ptr<const Artifact> artifact, Device device = {});

  const Artifact& artifact() const { return *artifact_; }
  Executable& executable() { return *exe_; }
  const Executable& executable() const { return *exe_; }
  // Binds the weight called `key_or_name` (a graph key or the user name)
  // to the caller's memory, which must outlive the program's use of it.
  void bind_weight(const std::string& key_or_name, const TensorView& view);
  // Keys of weights not bound yet.
  std::vector<std::string> unbound_weights() const;

 private:
  std::shared_ptr<const Artifact> artifact_;  // declared first: destroyed after the executable
  std::vector<DeviceBuffer> device_weights_;  // stored weights uploaded to the device (outlive the executable)
  std::unique_ptr<Executable> exe_;
  std::map<std::string, bool> bound_;  // key -> bound
};

}  // namespace kiln
