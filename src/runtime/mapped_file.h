// A read-only memory mapping of a whole file (RAII): the artifact reader
// hands out pointers into it, so weights are read where the file's pages
// are, never copied into a second host buffer.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace kiln {

class MappedFile {
 public:
  // Maps `path` read-only; throws kiln::Error(invalid_argument) when it cannot
  // be opened or mapped. An empty file maps to an empty span.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {static_cast<const uint8_t*>(data_), size_}; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kiln
