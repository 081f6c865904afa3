// Reading a safetensors file (the format of Hugging Face's `safetensors`
// package) to re-bind the weights of a program saved without them: an 8-byte
// little-endian header length, a JSON header mapping each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (plus an optional
// "__metadata__" object of strings), then the raw little-endian data.
//
// The whole file is checked before anything is handed out: the header length
// against the file, the JSON by a small strict parser (nesting depth, string
// escapes, integer ranges), every tensor's dtype, shape and offsets (inside the
// data, end - begin == numel * element size). Problems are
// kiln::Error(corrupt_file) naming the file and the tensor.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/tensor_type.h"
#include "runtime/mapped_file.h"

namespace kiln {

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  Dims shape;
  std::span<const uint8_t> data;  // into the file's bytes
};

class SafetensorsFile {
 public:
  static std::shared_ptr<const SafetensorsFile> open(const std::string& path);
  // From bytes in memory (tests, fuzzing); `name` is used in errors.
  static std::shared_ptr<const SafetensorsFile> from_bytes(std::vector<uint8_t> bytes, const std::string& name);

  const std::vector<SafetensorsEntry>& tensors() const { return tensors_; }
  const SafetensorsEntry* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  void parse(const std::string& name);

  std::unique_ptr<MappedFile> map_;
  std::vector<uint8_t> owned_;
  std::span<const uint8_t> bytes_;
  std::vector<SafetensorsEntry> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace kiln
