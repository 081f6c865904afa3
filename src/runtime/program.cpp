// kiln::Program (include/kiln/program.h): the public face of LoadedProgram
// (runtime/artifact_reader.h), translating the plain TensorRef into the
// runtime's TensorView and back.
#include "kiln/program.h"

#include <cstring>

#include "ops/op_def.h"
#include "runtime/artifact_reader.h"
#include "runtime/artifact_safetensors.h"
#include "support/error.h"

namespace kiln {

namespace {

static_assert(static_cast<int>(ElementType::f32) == static_cast<int>(DType::f32));
static_assert(static_cast<int>(ElementType::boolean) == static_cast<int>(DType::boolean));
static_assert(static_cast<int>(ElementType::bf16) == static_cast<int>(DType::bf16));
static_assert(static_cast<int>(ElementType::u8) == static_cast<int>(DType::u8));

DType to_dtype(ElementType t) { return static_cast<DType>(t); }
ElementType to_element(DType d) { return static_cast<ElementType>(d); }

TensorView to_view(const TensorRef& t, const std::string& what) {
  KILN_CHECK(static_cast<size_t>(t.dtype) < std::size(kAllDTypes), what, ": unknown element type");
  KILN_CHECK(t.strides.empty() || t.strides.size() == t.shape.size(), what, ": ", t.strides.size(),
             " strides for ", t.shape.size(), " dims");
  TensorView v;
  v.data = t.data;
  v.dtype = to_dtype(t.dtype);
  v.dims = t.shape;
  v.strides = t.strides.empty() ? contiguous_strides(t.shape) : t.strides;
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
  return Program(std::make_unique<Impl>(Impl{LoadedProgram(Artifact::open(path, read), parse_device(options.device)), {}, {}}));
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
  impl_->program.bind_weight(name, to_view(tensor, "weight '" + name + "'"));
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
  std::vector<TensorView> ins, outs;
  for (size_t i = 0; i < inputs.size(); ++i) ins.push_back(to_view(inputs[i], str_cat("input ", i)));
  for (size_t i = 0; i < outputs.size(); ++i) outs.push_back(to_view(outputs[i], str_cat("output ", i)));
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
  std::vector<TensorRef> refs;
  for (Tensor& t : results) refs.push_back(t.ref());
  run(inputs, refs);
  return results;
}

std::map<std::string, std::string> Program::metadata() const { return impl_->program.artifact().metadata(); }

std::string Program::describe() const { return impl_->program.executable().describe(); }

}  // namespace kiln
