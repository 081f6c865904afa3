// kiln::Program (include/kiln/program.h): the public face of LoadedProgram
// (runtime/artifact_reader.h), translating the plain TensorRef into the
// runtime's TensorView and back, and staging host tensors through device
// buffers for run(inputs) on a device.
#include "kiln/program.h"

#include <algorithm>
#include <cstring>

#include "ops/op_def.h"
#include "runtime/artifact_reader.h"
#include "runtime/artifact_safetensors.h"
#include "runtime/backend.h"
#include "support/error.h"

namespace kiln {

namespace {

static_assert(static_cast<int>(ElementType::f32) == static_cast<int>(DType::f32));
static_assert(static_cast<int>(ElementType::boolean) == static_cast<int>(DType::boolean));
static_assert(static_cast<int>(ElementType::bf16) == static_cast<int>(DType::bf16));
static_assert(static_cast<int>(ElementType::u8) == static_cast<int>(DType::u8));

DType to_dtype(ElementType t) { return static_cast<DType>(t); }
ElementType to_element(DType d) { return static_cast<ElementType>(d); }

// The caller's tensor as a view of memory on `device`.
TensorView to_view(const TensorRef& t, const std::string& what, Device device) {
  KILN_CHECK(static_cast<size_t>(t.dtype) < std::size(kAllDTypes), what, ": unknown element type");
  KILN_CHECK(t.strides.empty() || t.strides.size() == t.shape.size(), what, ": ", t.strides.size(),
             " strides for ", t.shape.size(), " dims");
  TensorView v;
  v.data = t.data;
  v.dtype = to_dtype(t.dtype);
  v.dims = t.shape;
  v.strides = t.strides.empty() ? contiguous_strides(t.shape) : t.strides;
  v.device = device;
  return v;
}

TensorInfo info(std::string name, const TensorType& t) {
  return TensorInfo{std::move(name), to_element(t.dtype), t.dims, t.strides};
}

// Copies contiguous elements into `type`'s (possibly strided) layout at dst.
void copy_into_layout(const uint8_t* src, std::byte* dst, const TensorType& type) {
  const size_t esize = dtype_size(type.dtype);
  const int64_t n = type.numel();
  Dims index(type.rank(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t at = 0;
    for (size_t d = 0; d < type.rank(); ++d) at += index[d] * type.strides[d];
    std::memcpy(dst + at * esize, src + i * esize, esize);
    for (size_t d = type.rank(); d-- > 0;) {
      if (++index[d] < type.dims[d]) break;
      index[d] = 0;
    }
  }
}

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device{DeviceKind::cpu, 0};
  if (s == "cuda") return Device{DeviceKind::cuda, 0};
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.size() < 8 &&
      s.find_first_not_of("0123456789", 5) == std::string::npos)
    return Device{DeviceKind::cuda, std::stoi(s.substr(5))};
  fail(ErrorKind::invalid_argument, "unknown device '", s, "' (expected cpu, cuda or cuda:N)");
}

}  // namespace

size_t element_size(ElementType type) { return dtype_size(to_dtype(type)); }
const char* element_type_name(ElementType type) { return dtype_name(to_dtype(type)).data(); }

int64_t TensorInfo::numel() const { return kiln::numel(shape); }
size_t TensorInfo::nbytes() const { return static_cast<size_t>(numel()) * element_size(dtype); }

struct Program::Impl {
  LoadedProgram program;
  std::unique_ptr<Backend> backend;  // the program's device: allocate, upload, download
  std::vector<std::shared_ptr<const SafetensorsFile>> weight_files;  // mapped files weights are bound into
  std::vector<std::vector<std::byte>> weight_copies;  // misaligned safetensors data, copied once
};

Program::Program(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;
Program::~Program() = default;

Program Program::load(const std::string& path, const LoadOptions& options) {
  ArtifactReadOptions read;
  read.verify_weights = options.verify_weights;
  const Device device = parse_device(options.device);
  // The program first: on a device without CUDA it is what says so clearly.
  return Program(
      std::make_unique<Impl>(Impl{LoadedProgram(Artifact::open(path, read), device), make_backend(device), {}, {}}));
}

std::vector<TensorInfo> Program::inputs() const {
  std::vector<TensorInfo> out;
  const auto& ins = impl_->program.executable().graph().inputs();
  for (const Value* v : ins) out.push_back(info(v->name, v->type));
  return out;
}

std::vector<TensorInfo> Program::outputs() const {
  std::vector<TensorInfo> out;
  for (const TensorType& t : impl_->program.executable().output_types())
    out.push_back(info(std::to_string(out.size()), t));
  return out;
}

std::vector<TensorInfo> Program::weights() const {
  std::vector<TensorInfo> out;
  for (const ArtifactWeight& w : impl_->program.artifact().weights()) out.push_back(info(w.name, w.type));
  return out;
}

std::vector<std::string> Program::unbound_weights() const {
  std::vector<std::string> out;
  for (const std::string& key : impl_->program.unbound_weights())
    for (const ArtifactWeight& w : impl_->program.artifact().weights())
      if (w.key == key) out.push_back(w.name);
  return out;
}

void Program::bind_weight(const std::string& name, const TensorRef& tensor) {
  impl_->program.bind_weight(name, to_view(tensor, "weight '" + name + "'", impl_->program.executable().device()));
}

bool Program::weight_stored(const std::string& name) const {
  for (const ArtifactWeight& w : impl_->program.artifact().weights())
    if (w.name == name || w.key == name) return w.data != nullptr;
  fail(ErrorKind::invalid_argument, "the program has no weight '", name, "'");
}

size_t Program::bind_safetensors(const std::string& path) {
  KILN_CHECK_KIND(unsupported, impl_->program.executable().device().kind == DeviceKind::cpu,
                  "bind_safetensors: binding host weights to a ", to_string(impl_->program.executable().device()),
                  " program is not supported (load it on cpu)");
  auto file = SafetensorsFile::open(path);
  size_t bound = 0;
  for (const ArtifactWeight& w : impl_->program.artifact().weights()) {
    const SafetensorsEntry* e = file->find(w.name);
    if (e == nullptr) e = file->find(w.key);
    if (e == nullptr) continue;
    TensorType have(e->dtype, e->shape);
    const Dims want_dims = w.type.dims;
    KILN_CHECK(e->dtype == w.type.dtype && e->shape == want_dims, "bind_safetensors: '", e->name, "' in '", path,
               "' is ", to_string(have), ", the program's weight '", w.name, "' is ", to_string(w.type));
    const void* data = e->data.data();
    const bool strided = !(w.type.strides == contiguous_strides(w.type.dims)) && w.type.numel() > 1;
    if (strided || reinterpret_cast<uintptr_t>(data) % dtype_size(e->dtype) != 0) {
      // The weight's layout differs from the file's (contiguous) one, or the
      // data is not aligned to its element size: one copy in the program's layout.
      std::vector<std::byte> copy(static_cast<size_t>(w.type.storage_bytes()));
      copy_into_layout(e->data.data(), copy.data(), w.type);
      impl_->weight_copies.push_back(std::move(copy));
      data = impl_->weight_copies.back().data();
    }
    impl_->program.bind_weight(w.key, TensorView(const_cast<void*>(data), w.type));
    ++bound;
  }
  impl_->weight_files.push_back(std::move(file));
  return bound;
}

std::string Program::graph_text() const { return impl_->program.artifact().graph_text(); }

std::map<std::string, int64_t> Program::op_counts() const {
  std::map<std::string, int64_t> out;
  for (const Node* n : impl_->program.executable().graph().nodes()) ++out[n->op->name];
  return out;
}

FileInfo Program::file_info() const {
  const Artifact& a = impl_->program.artifact();
  FileInfo info;
  info.format_version = a.format_version();
  info.file_size = a.file_size();
  info.has_weight_data = a.has_weight_data();
  for (const Artifact::SectionInfo& s : a.sections()) info.sections.push_back({s.name, s.offset, s.size});
  return info;
}

void Program::run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) {
  const Device device = impl_->program.executable().device();
  std::vector<TensorView> ins, outs;
  for (size_t i = 0; i < inputs.size(); ++i) ins.push_back(to_view(inputs[i], str_cat("input ", i), device));
  for (size_t i = 0; i < outputs.size(); ++i) outs.push_back(to_view(outputs[i], str_cat("output ", i), device));
  impl_->program.executable().run(ins, outs);
}

std::vector<Tensor> Program::run(std::span<const TensorRef> inputs) {
  std::vector<Tensor> results;
  for (const TensorInfo& o : outputs()) {
    Tensor t;
    t.dtype = o.dtype;
    t.shape = o.shape;
    t.bytes.resize(o.nbytes());
    results.push_back(std::move(t));
  }
  std::vector<TensorRef> out_refs;
  for (Tensor& t : results) out_refs.push_back(t.ref());
  if (impl_->program.executable().device().kind == DeviceKind::cpu) {
    run(inputs, out_refs);
    return results;
  }
  // Host staging: each input's storage is copied into a device buffer of the
  // same layout (checked first, so that no more than the input's own memory
  // is read), the call writes into device buffers, and those are copied back.
  const std::vector<TensorType> want = impl_->program.executable().input_types();
  KILN_CHECK(inputs.size() == want.size(), "run: expected ", want.size(), " inputs, got ", inputs.size());
  std::vector<DeviceMemory> staged;
  std::vector<TensorRef> in_refs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorView host = to_view(inputs[i], str_cat("input ", i), Device{});
    KILN_CHECK(host.dtype == want[i].dtype && host.dims == want[i].dims, "run: input ", i, " is ",
               to_string(host.type()), ", the program takes ", to_string(want[i]));
    KILN_CHECK(std::all_of(host.strides.begin(), host.strides.end(), [](int64_t s) { return s >= 0; }),
               "run: input ", i, " has a negative stride (strides [", dims_to_string(host.strides), "])");
    const size_t bytes = static_cast<size_t>(host.type().storage_bytes());
    staged.push_back(allocate(bytes));
    upload(staged.back().data(), host.data, bytes);
    in_refs.push_back(inputs[i]);
    in_refs.back().data = staged.back().data();
  }
  for (size_t k = 0; k < results.size(); ++k) {
    staged.push_back(allocate(results[k].bytes.size()));
    out_refs[k].data = staged.back().data();
  }
  run(in_refs, out_refs);
  for (size_t k = 0; k < results.size(); ++k)
    download(results[k].bytes.data(), out_refs[k].data, results[k].bytes.size());
  return results;
}

std::string Program::device() const { return to_string(impl_->program.executable().device()); }

DeviceMemory Program::allocate(size_t bytes) const {
  auto buffer = std::make_shared<DeviceBuffer>(impl_->backend->default_allocator()->allocate(bytes, 256));
  DeviceMemory memory;
  memory.data_ = buffer->data();
  memory.size_ = bytes;
  memory.owner_ = std::move(buffer);
  return memory;
}

void Program::upload(void* device_dst, const void* host_src, size_t bytes) const {
  impl_->backend->upload(device_dst, host_src, bytes);
}

void Program::download(void* host_dst, const void* device_src, size_t bytes) const {
  impl_->backend->download(host_dst, device_src, bytes);
}

std::map<std::string, std::string> Program::metadata() const { return impl_->program.artifact().metadata(); }

std::string Program::describe() const { return impl_->program.executable().describe(); }

}  // namespace kiln
