// cuDNN backend-API helpers (cudnn_graph.h, Note [cuDNN plans]).
#ifdef KILN_CUDA_HAVE_CUDNN
#include "backends/cuda/cudnn_graph.h"

#include <array>
#include <map>
#include <memory>

#include "backends/cuda/cuda_common.h"
#include "support/error.h"

// The handle attributes of operation graphs and plans are deprecated in newer
// cuDNN 9 releases but still read by older ones (9.14 on the GPU machine).
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace kiln::cuda {

void check_cudnn(cudnnStatus_t st, const std::string& what) {
  if (st == CUDNN_STATUS_SUCCESS) return;
  char last[512] = {0};
  cudnnGetLastErrorString(last, sizeof(last));
  fail(ErrorKind::runtime, what, ": cuDNN ", cudnnGetErrorString(st), last[0] ? str_cat(" (", last, ")") : "");
}

BackendDescriptor::BackendDescriptor(cudnnBackendDescriptorType_t type, const std::string& what) : what_(what) {
  check_cudnn(cudnnBackendCreateDescriptor(type, &d_), what_);
}

BackendDescriptor::~BackendDescriptor() {
  if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
}

BackendDescriptor& BackendDescriptor::operator=(BackendDescriptor&& o) noexcept {
  if (this != &o) {
    if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
    d_ = o.d_;
    what_ = std::move(o.what_);
    o.d_ = nullptr;
  }
  return *this;
}

void BackendDescriptor::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                            const void* values) {
  check_cudnn(cudnnBackendSetAttribute(d_, name, type, count, values),
              str_cat(what_, ": setting cuDNN attribute ", static_cast<int>(name)));
}

void BackendDescriptor::set_desc(cudnnBackendAttributeName_t name, const BackendDescriptor& value) {
  cudnnBackendDescriptor_t d = value.get();
  set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
}

void BackendDescriptor::finalize() { check_cudnn(cudnnBackendFinalize(d_), what_ + ": finalizing a cuDNN descriptor"); }

cudnnStatus_t BackendDescriptor::try_finalize() { return cudnnBackendFinalize(d_); }

CudnnHandle& cudnn_handle(int device) {
  // Created once per device and kept for the process: destroying handles at
  // exit races with the CUDA runtime's own teardown.
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<CudnnHandle>> handles;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = handles[device];
  if (!slot) {
    DeviceGuard guard(device);
    auto h = std::make_unique<CudnnHandle>();
    check_cudnn(cudnnCreate(&h->handle), str_cat("cudnnCreate on cuda:", device));
    slot = std::move(h);
  }
  return *slot;
}

BackendDescriptor make_tensor(int64_t uid, cudnnDataType_t type, const int64_t dims[4], const int64_t strides[4],
                              int64_t alignment, bool is_virtual, const std::string& what) {
  BackendDescriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
  t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  bool v = is_virtual;
  t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v);
  t.finalize();
  return t;
}

namespace {

// Whether the engine of `config` uses tensor cores or down-converts its inputs.
bool uses_reduced_precision(const BackendDescriptor& config, const std::string& what) {
  BackendDescriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR, what);
  cudnnBackendDescriptor_t e = engine.get();
  int64_t n = 0;
  check_cudnn(cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                       &n, &e),
              what + ": reading an engine config");
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  check_cudnn(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                       static_cast<int64_t>(notes.size()), &n, notes.data()),
              what + ": reading an engine's numerical notes");
  for (int64_t i = 0; i < n; ++i)
    if (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE || notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)
      return true;
  return false;
}

// The engine configs the heuristics of `mode` propose for `graph`, best first.
std::vector<BackendDescriptor> heuristic_configs(const BackendDescriptor& graph, cudnnBackendHeurMode_t mode,
                                                 const std::string& what) {
  std::vector<BackendDescriptor> configs;
  BackendDescriptor heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, what);
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (heur.try_finalize() != CUDNN_STATUS_SUCCESS) return configs;
  int64_t count = 0;
  if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                               nullptr) != CUDNN_STATUS_SUCCESS ||
      count <= 0)
    return configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, what);
    raw.push_back(configs.back().get());
  }
  int64_t got = 0;
  check_cudnn(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                       &got, raw.data()),
              what + ": reading the heuristics' results");
  configs.resize(static_cast<size_t>(got));
  return configs;
}

}  // namespace

bool build_plan(CudnnHandle& handle, const std::vector<const BackendDescriptor*>& ops, bool allow_tensor_cores,
                int64_t max_workspace, CudnnPlan* out, std::string* reason, const std::string& what) {
  BackendDescriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, what);
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const BackendDescriptor* op : ops) raw.push_back(op->get());
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(raw.size()), raw.data());
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle.handle);
  cudnnStatus_t st = graph.try_finalize();
  if (st != CUDNN_STATUS_SUCCESS) {
    *reason = str_cat("cuDNN rejects the operation graph (", cudnnGetErrorString(st), ")");
    return false;
  }
  int tried = 0;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    for (BackendDescriptor& config : heuristic_configs(graph, mode, what)) {
      ++tried;
      if (!allow_tensor_cores && uses_reduced_precision(config, what)) continue;
      BackendDescriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, what);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle.handle);
      plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
      if (plan.try_finalize() != CUDNN_STATUS_SUCCESS) continue;
      int64_t workspace = 0, n = 0;
      check_cudnn(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                           &n, &workspace),
                  what + ": reading a plan's workspace size");
      if (workspace > max_workspace) continue;
      out->plan = std::move(plan);
      out->workspace = workspace;
      return true;
    }
  }
  *reason = str_cat("cuDNN has no usable engine for this graph (", tried, " engine configs tried",
                    allow_tensor_cores ? "" : ", tensor-core engines excluded for f32", ")");
  return false;
}

void execute_plan(CudnnHandle& handle, const CudnnPlan& plan, const std::vector<int64_t>& uids,
                  std::vector<void*> pointers, void* workspace, cudaStream_t stream, const std::string& what) {
  BackendDescriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, what);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()), uids.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(pointers.size()),
           pointers.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize();
  std::lock_guard<std::mutex> lock(handle.mutex);
  check_cudnn(cudnnSetStream(handle.handle, stream), what + ": cudnnSetStream");
  check_cudnn(cudnnBackendExecute(handle.handle, plan.plan.get(), pack.get()), what + ": cudnnBackendExecute");
}

}  // namespace kiln::cuda
#endif  // KILN_CUDA_HAVE_CUDNN
