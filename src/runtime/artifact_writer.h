// Saving a compiled program: writes an Executable's optimized graph and,
// optionally, the weights it is bound to into one artifact file (Note
// [Artifact format] in runtime/artifact_format.h).
//
// The weights are read from the memory the executable is bound to, hashed
// once and written once, never gathered into a second buffer: on the CPU in
// place; on CUDA copied to the host chunk by chunk (after waiting for the
// device's pending work) through one staging buffer of at most 64 MiB, once
// for the checksum and once for the write. Either file loads on cpu or cuda.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kiln {

class Executable;

struct ArtifactSaveOptions {
  // false: the file holds the weights' keys, names and types but not their
  // data; the loader re-binds them (from a dict, a safetensors file, ...).
  bool weights = true;
  // key -> the name users know the weight by (e.g. "fc1.weight" for the key
  // "p_fc1_weight"); keys without one are named by their key.
  std::map<std::string, std::string> weight_names;
  // Free-form key/value pairs kept in the metadata section.
  std::map<std::string, std::string> metadata;
  // The saved program's outputs as indices into the executable's (repeats
  // allowed, unused ones dropped), so that a loaded program returns exactly
  // what the caller's program did; empty: all of them, in order.
  std::vector<size_t> outputs;
};

// Writes the artifact to `path` (through a temporary file renamed into place,
// so a failed save leaves no partial file). Throws kiln::Error when a weight
// is not bound (weights=true) or the file cannot be written.
void save_artifact(const Executable& exe, const std::string& path, const ArtifactSaveOptions& options = {});

}  // namespace kiln
