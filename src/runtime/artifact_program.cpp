// LoadedProgram (runtime/artifact_reader.h): an artifact's graph compiled
// into an Executable with the stored weights bound. Kept apart from the
// reader so that the reader (and its fuzz target) needs no backend.
#include "runtime/artifact_reader.h"
#include "runtime/backend.h"
#include "runtime/cuda_architecture.h"
#include "support/error.h"

namespace kiln {

LoadedProgram::LoadedProgram(std::shared_ptr<const Artifact> artifact, Device device) : artifact_(std::move(artifact)) {
  KILN_CHECK(artifact_ != nullptr, "LoadedProgram: null artifact");
  if (device.kind == DeviceKind::cuda) {
    std::string reason;
    KILN_CHECK_KIND(unsupported, cuda_available(&reason), "cannot load this program on ", to_string(device),
                    ": CUDA is not available (", reason, "); load it on cpu");
  }
  std::unique_ptr<Backend> uploader;
  const auto arch = artifact_->metadata().find(kCudaArchitectureKey);
  if (device.kind == DeviceKind::cuda && arch != artifact_->metadata().end()) {
    uploader = make_backend(device);
    check_cuda_architecture(arch->second, uploader->architecture(), to_string(device));
  }
  ExecutableOptions options;
  const auto math = artifact_->metadata().find(kMathKey);
  if (math != artifact_->metadata().end()) options.math = parse_math_options(math->second);
  exe_ = std::make_unique<Executable>(artifact_->graph().clone(), device, std::move(options));
  for (const ArtifactWeight& w : artifact_->weights()) {
    bound_[w.key] = false;
    if (w.data == nullptr) continue;
    if (device.kind == DeviceKind::cpu) {
      exe_->bind_weight(w.key, TensorView(const_cast<void*>(w.data), w.type, device));
    } else {
      // Straight from the mapped pages into a device buffer: no host copy.
      if (!uploader) uploader = make_backend(device);
      DeviceBuffer buffer = uploader->default_allocator()->allocate(w.bytes, 256);
      uploader->upload(buffer.data(), w.data, w.bytes);
      exe_->bind_weight(w.key, TensorView(buffer.data(), w.type, device));
      device_weights_.push_back(std::move(buffer));
    }
    bound_[w.key] = true;
  }
}

void LoadedProgram::bind_weight(const std::string& key_or_name, const TensorView& view) {
  std::string key = key_or_name;
  if (!bound_.count(key)) {
    for (const ArtifactWeight& w : artifact_->weights())
      if (w.name == key_or_name) key = w.key;
  }
  exe_->bind_weight(key, view);
  bound_[key] = true;
}

std::vector<std::string> LoadedProgram::unbound_weights() const {
  std::vector<std::string> out;
  for (const ArtifactWeight& w : artifact_->weights())
    if (!bound_.at(w.key)) out.push_back(w.key);
  return out;
}

}  // namespace kiln
