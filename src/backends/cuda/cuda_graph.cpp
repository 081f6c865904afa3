// CUDA graph capture and replay, and the cross-stream fence (cuda_graph.h).
#include "backends/cuda/cuda_graph.h"

#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_common.h"
#include "support/error.h"

namespace kiln::cuda {

namespace {

class CudaGraphWork final : public CapturedWork {
 public:
  explicit CudaGraphWork(int device) : device_(device) {
    DeviceGuard guard(device_);
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating the capture stream");
  }
  ~CudaGraphWork() override {
    DeviceGuard guard(device_);
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Records body into a new graph; null with *reason when it cannot be captured.
  cudaGraph_t record(const std::function<void(Stream)>& body, std::string* reason) {
    DeviceGuard guard(device_);
    cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
      cudaGetLastError();
      *reason = str_cat("cudaStreamBeginCapture failed (", cudaGetErrorString(e), ")");
      return nullptr;
    }
    std::string thrown;
    try {
      body(Stream{stream_});
    } catch (const std::exception& ex) {
      thrown = ex.what();
    }
    cudaGraph_t graph = nullptr;
    e = cudaStreamEndCapture(stream_, &graph);
    if (!thrown.empty() || e != cudaSuccess || graph == nullptr) {
      cudaGetLastError();  // clear the capture's error state
      if (graph != nullptr) cudaGraphDestroy(graph);
      *reason = !thrown.empty() ? "the call cannot be captured: " + thrown
                                : str_cat("the call cannot be captured (", cudaGetErrorString(e), ")");
      return nullptr;
    }
    return graph;
  }

  bool instantiate(cudaGraph_t graph, std::string* reason) {
    DeviceGuard guard(device_);
    cudaError_t e = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
      cudaGetLastError();
      exec_ = nullptr;
      *reason = str_cat("cudaGraphInstantiate failed (", cudaGetErrorString(e), ")");
      return false;
    }
    return true;
  }

  void replay(Stream stream) override {
    DeviceGuard guard(device_);
    check_cuda(cudaGraphLaunch(exec_, static_cast<cudaStream_t>(stream.handle)), "cudaGraphLaunch");
  }

  bool update(const std::function<void(Stream)>& body, std::string* reason) override {
    cudaGraph_t graph = record(body, reason);
    if (graph == nullptr) return false;
    DeviceGuard guard(device_);
    cudaGraphExecUpdateResultInfo info{};
    cudaError_t e = cudaGraphExecUpdate(exec_, graph, &info);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
      cudaGetLastError();
      *reason = str_cat("cudaGraphExecUpdate failed (", cudaGetErrorString(e), ", result ", static_cast<int>(info.result),
                        ")");
      return false;
    }
    return true;
  }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

class CudaFence final : public StreamFence {
 public:
  explicit CudaFence(int device) : device_(device) {
    DeviceGuard guard(device_);
    check_cuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "creating the call fence event");
  }
  ~CudaFence() override {
    DeviceGuard guard(device_);
    cudaEventDestroy(event_);
  }
  void record(Stream stream) override {
    DeviceGuard guard(device_);
    check_cuda(cudaEventRecord(event_, static_cast<cudaStream_t>(stream.handle)), "recording the call fence");
    recorded_ = true;
  }
  void wait(Stream stream) override {
    if (!recorded_) return;
    DeviceGuard guard(device_);
    check_cuda(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream.handle), event_, 0), "waiting on the call fence");
  }

 private:
  int device_;
  cudaEvent_t event_ = nullptr;
  bool recorded_ = false;
};

}  // namespace

std::unique_ptr<CapturedWork> capture_cuda_graph(int device, const std::function<void(Stream)>& body,
                                                 std::string* reason) {
  auto work = std::make_unique<CudaGraphWork>(device);
  cudaGraph_t graph = work->record(body, reason);
  if (graph == nullptr || !work->instantiate(graph, reason)) return nullptr;
  return work;
}

std::unique_ptr<StreamFence> make_cuda_fence(int device) { return std::make_unique<CudaFence>(device); }

}  // namespace kiln::cuda
