// kiln's public C++ API: load a saved program (an artifact written by
// kiln.save or kiln::save_artifact), bind weights if the file holds none,
// and run it on the CPU (or CUDA), in a process with no Python and no torch.
//
//   kiln::Program program = kiln::Program::load("model.kiln");
//   std::vector<kiln::Tensor> outputs = program.run({kiln::TensorRef{x.data(), kiln::ElementType::f32, {1, 16}}});
//
// Tensors cross as a pointer plus shape plus element type (TensorRef; strides
// in elements, empty for contiguous); the caller owns that memory. On CUDA,
// run(inputs) takes and returns host memory (staged through the device, the
// convenient path), while run(inputs, outputs) and bind_weight take memory on
// the program's device (the fast path; allocate, upload and download help
// with it). Errors are thrown as exceptions derived from std::runtime_error
// (kiln::Error inside kiln), with a message that names the input, weight or
// part of the file at fault; a damaged file is reported, never crashes the
// process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln {

enum class ElementType : uint8_t { f32, f16, bf16, f64, i64, i32, i16, i8, u8, boolean };

size_t element_size(ElementType type);
const char* element_type_name(ElementType type);  // "f32", "bf16", "bool", ...

// A tensor the caller owns. Not copied: weights are read from it on every run.
struct TensorRef {
  void* data = nullptr;
  ElementType dtype = ElementType::f32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements; empty means contiguous
};

// What a program takes, returns or binds.
struct TensorInfo {
  std::string name;  // weights: the name to bind by; inputs and outputs: their position as text
  ElementType dtype = ElementType::f32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  int64_t numel() const;
  size_t nbytes() const;  // contiguous
};

// Memory on a program's device (Program::allocate; host memory for a cpu
// program), freed when the last copy of this handle goes.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  friend class Program;
  void* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<void> owner_;
};

// A contiguous tensor that owns its bytes (run's results).
struct Tensor {
  ElementType dtype = ElementType::f32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
  TensorRef ref() { return TensorRef{bytes.data(), dtype, shape, {}}; }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(bytes.data());
  }
};

struct LoadOptions {
  bool verify_weights = true;  // hash the stored weights while loading (touches every page once)
  // Where to run: "cpu", "cuda" or "cuda:N". Weights stored in the file are
  // uploaded straight from the mapping into device buffers; without a usable
  // CUDA device, load throws an error saying why.
  std::string device = "cpu";
};

// The file a program was loaded from, for inspection.
struct FileInfo {
  struct Section {
    std::string name;
    uint64_t offset = 0, size = 0;
  };
  uint32_t format_version = 0;
  uint64_t file_size = 0;
  std::vector<Section> sections;
  bool has_weight_data = false;
};

class Program {
 public:
  // Maps the file, checks it and prepares it to run on options.device. On the
  // CPU, weights stored in the file are used in place (mapped, not copied).
  static Program load(const std::string& path, const LoadOptions& options = {});
  Program(Program&&) noexcept;
  Program& operator=(Program&&) noexcept;
  ~Program();

  std::vector<TensorInfo> inputs() const;
  std::vector<TensorInfo> outputs() const;
  std::vector<TensorInfo> weights() const;
  // Names of the weights still to bind (the file was saved without them).
  std::vector<std::string> unbound_weights() const;
  // Whether a weight's data came from the file (false: it must be bound).
  bool weight_stored(const std::string& name) const;
  // Binds a weight by its name (or key) to the caller's memory on the
  // program's device, which must stay alive and unchanged-in-shape while the
  // program may run.
  void bind_weight(const std::string& name, const TensorRef& tensor);
  // Binds every weight named in a safetensors file (mapped, not copied; the
  // program keeps the mapping). Names are matched as bind_weight's; a tensor
  // whose dtype or shape differs from the weight's is an error naming both;
  // tensors the program does not read are ignored. Returns how many were bound.
  size_t bind_safetensors(const std::string& path);
  // The fast path: runs one call on inputs in memory on the program's device,
  // writing into the caller's contiguous output buffers there (host memory for
  // a cpu program; device memory, e.g. from allocate, for a cuda program). On
  // CUDA the call is enqueued on the default stream and returns before the
  // results are ready; download waits for them.
  void run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs);
  // The convenient path: runs one call on inputs in HOST memory and returns
  // the outputs in host memory, whatever the device. On CUDA each call copies
  // the inputs into fresh device buffers, waits for the results and copies
  // them back: correct, not fast (use the overload above in a loop).
  std::vector<Tensor> run(std::span<const TensorRef> inputs);
  std::vector<Tensor> run(std::initializer_list<TensorRef> inputs) {
    return run(std::span<const TensorRef>(inputs.begin(), inputs.size()));
  }
  // Where the program runs: "cpu" or "cuda:N".
  std::string device() const;
  // `bytes` of memory on the program's device (aligned to 256 bytes), for the
  // fast run's inputs and outputs. Throws when the device is out of memory.
  DeviceMemory allocate(size_t bytes) const;
  // Copy `bytes` between host memory and memory on the program's device and
  // return when the copy is done. download first waits until every call made
  // so far has finished on the device, so it also marks the end of a call.
  void upload(void* device_dst, const void* host_src, size_t bytes) const;
  void download(void* host_dst, const void* device_src, size_t bytes) const;
  // The file's metadata and a readable account of the program (kernels and memory plan).
  std::map<std::string, std::string> metadata() const;
  std::string describe() const;
  // The program's graph as IR text (docs/ir.md), and each op's node count.
  std::string graph_text() const;
  std::map<std::string, int64_t> op_counts() const;
  FileInfo file_info() const;

 private:
  struct Impl;
  explicit Program(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
