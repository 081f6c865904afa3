// kiln::Program (include/kiln/program.h): the public face of LoadedProgram
// (runtime/artifact_reader.h), translating the plain TensorRef into the
// runtime's TensorView and back.
#include "kiln/program.h"

#include "runtime/artifact_reader.h"
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

}  // namespace

size_t element_size(ElementType type) { return dtype_size(to_dtype(type)); }
const char* element_type_name(ElementType type) { return dtype_name(to_dtype(type)).data(); }

int64_t TensorInfo::numel() const { return kiln::numel(shape); }
size_t TensorInfo::nbytes() const { return static_cast<size_t>(numel()) * element_size(dtype); }

struct Program::Impl {
  LoadedProgram program;
};

Program::Program(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;
Program::~Program() = default;

Program Program::load(const std::string& path, const LoadOptions& options) {
  ArtifactReadOptions read;
  read.verify_weights = options.verify_weights;
  return Program(std::make_unique<Impl>(Impl{LoadedProgram(Artifact::open(path, read))}));
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
