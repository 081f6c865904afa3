// A fused group as a generated kernel: the source from fused_codegen.h, the
// CUBIN from the kernel cache (NVRTC on a miss), loaded with the runtime's
// library API (cudaLibraryLoadData) and launched with cudaLaunchKernel, so
// it is captured into CUDA graphs like any other kernel.
#include "backends/cuda/fused_lowering.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <mutex>

#include "backends/cuda/cuda_plugin.h"
#include "backends/cuda/fused_codegen.h"
#include "backends/cuda/kernel_cache.h"
#include "support/error.h"

namespace kiln::cuda {

namespace {

// The device's architecture as NVRTC names it (sm_90 -> 90).
int device_arch(int device) {
  int major = 0, minor = 0;
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "compute capability");
  check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "compute capability");
  return major * 10 + minor;
}

class GeneratedFusedKernel final : public CudaKernel {
 public:
  // The CUBIN compiles on the kernel cache's pool (kernel_cache.h) while the
  // rest of the graph lowers; the first launch waits for it and loads it. An
  // executable's first call never runs under a CUDA-graph capture
  // (executable.cpp), so nothing loads inside one.
  GeneratedFusedKernel(const Node& node, int device, FusedSource src)
      : CudaKernel(node, device),
        src_(std::move(src)),
        cubin_(cubin_async(src_.source, {NvrtcHeader{kScalarMathHeaderName, scalar_math_header_text()}},
                           device_arch(device), "kiln_fused.cu")) {}
  ~GeneratedFusedKernel() override {
    cubin_.wait();  // never leave a compile of ours running
    if (library_ != nullptr) cudaLibraryUnload(library_);
  }
  std::string describe() const override {
    return src_.vec > 1 ? str_cat("cuda fused (nvrtc, vec ", src_.vec, ")") : "cuda fused (nvrtc)";
  }

 protected:
  void launch(std::span<const TensorView> in, std::span<const TensorView> out, cudaStream_t s) const override {
    if (src_.numel == 0) return;
    std::vector<void*> ptrs;
    ptrs.reserve(in.size() + out.size());
    for (const TensorView& v : in) ptrs.push_back(v.data);
    for (const TensorView& v : out) ptrs.push_back(v.data);
    bool vector = src_.vec > 1;
    for (size_t k = 0; k < ptrs.size() && vector; ++k) {
      const int align = src_.vec_alignment[k];
      vector = align == 0 || reinterpret_cast<uintptr_t>(ptrs[k]) % static_cast<uintptr_t>(align) == 0;
    }
    std::call_once(loaded_, [this] { load(); });
    const int64_t work = vector ? src_.numel / src_.vec : src_.numel;
    const int64_t blocks = std::min<int64_t>((work + kFusedThreads - 1) / kFusedThreads, int64_t{1} << 20);
    void* args[] = {ptrs.data()};  // the kernel's one parameter: struct { void* p[N]; }
    cudaKernel_t k = vector ? vector_ : scalar_;
    check_launch(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(static_cast<unsigned>(blocks)),
                                  dim3(kFusedThreads), args, 0, s));
  }

 private:
  // Waits for the CUBIN (rethrowing its compile error) and loads both kernels into the device's context.
  void load() const {
    std::shared_ptr<const std::string> cubin = cubin_.get();
    check_cuda(cudaLibraryLoadData(&library_, cubin->data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
               str_cat("loading the generated kernel of fused node '", node_name(), "'"));
    check_cuda(cudaLibraryGetKernel(&scalar_, library_, kFusedScalarKernel), "finding kiln_fused_scalar");
    if (src_.vec > 1) check_cuda(cudaLibraryGetKernel(&vector_, library_, kFusedVectorKernel), "finding kiln_fused_vec");
    for (cudaKernel_t k : {scalar_, vector_}) {  // loading is lazy: load now, outside any capture
      cudaFuncAttributes attributes{};
      if (k != nullptr)
        check_cuda(cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(k)), "loading a generated kernel");
    }
  }

  FusedSource src_;
  CubinFuture cubin_;
  mutable std::once_flag loaded_;
  mutable cudaLibrary_t library_ = nullptr;
  mutable cudaKernel_t scalar_ = nullptr, vector_ = nullptr;
};

}  // namespace

std::unique_ptr<BackendKernel> make_fused_kernel(const Node& node, const LowerContext& ctx, std::string* reason) {
  std::optional<FusedSource> src = generate_fused_source(node, reason);
  if (!src) return nullptr;
  std::string why;
  if (!nvrtc_available(&why)) {
    *reason = "fused groups need NVRTC: " + why;
    return nullptr;
  }
  return std::make_unique<GeneratedFusedKernel>(node, ctx.device, std::move(*src));
}

}  // namespace kiln::cuda

extern "C" void kiln_cuda_kernel_cache_stats(int64_t out[5]) {
  const kiln::cuda::KernelCacheStats s = kiln::cuda::kernel_cache_stats();
  out[0] = s.nvrtc_compiles;
  out[1] = s.memory_hits;
  out[2] = s.disk_hits;
  out[3] = s.disk_rejects;
  out[4] = s.disk_writes;
}

extern "C" void kiln_cuda_kernel_cache_forget() { kiln::cuda::kernel_cache_forget_memory(); }
