// A small fixed pool of worker threads and parallel_for over an index range.
// Kernels use it for large elementwise work, reductions and GEMM-free loops.
// The pool size comes from KILN_NUM_THREADS (default: hardware concurrency).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }  // workers plus the caller

  // Calls fn(begin, end) on disjoint chunks covering [0, n), each at least
  // `grain` long, in parallel; returns when all are done. Runs inline when n
  // is small or when called from inside a chunk of another parallel_for (on a
  // worker or on the calling thread). Exceptions propagate.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  static ThreadPool& global();

 private:
  void worker_loop();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 0, next_chunk_ = 0, num_chunks_ = 0, finished_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::mutex run_mutex_;  // one parallel_for at a time
};

}  // namespace kiln
