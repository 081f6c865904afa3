// ThreadPool: workers take chunks of the current job until none remain.
#include "support/thread_pool.h"

#include <algorithm>

#include "support/env.h"

namespace kiln {

namespace {
thread_local bool t_in_worker = false;
}

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < std::max(1, num_threads); ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(env::num_threads());
  return pool;
}

void ThreadPool::worker_loop() {
  t_in_worker = true;
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return stop_ || (generation_ != seen && next_chunk_ < num_chunks_); });
    if (stop_) return;
    seen = generation_;
    while (next_chunk_ < num_chunks_) {
      int64_t c = next_chunk_++;
      const auto* fn = job_;
      int64_t begin = c * job_chunk_, end = std::min(job_n_, begin + job_chunk_);
      lock.unlock();
      try {
        (*fn)(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> g(mutex_);
        if (!error_) error_ = std::current_exception();
      }
      lock.lock();
      if (++finished_ == num_chunks_) done_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t max_chunks = std::min<int64_t>(size(), (n + grain - 1) / grain);
  if (max_chunks <= 1 || t_in_worker || workers_.empty()) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  std::unique_lock<std::mutex> lock(mutex_);
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = (n + max_chunks - 1) / max_chunks;
  num_chunks_ = (n + job_chunk_ - 1) / job_chunk_;
  next_chunk_ = 0;
  finished_ = 0;
  error_ = nullptr;
  ++generation_;
  wake_.notify_all();
  // The caller works too, as a worker: a parallel_for inside its chunks runs inline (the pool is busy).
  t_in_worker = true;
  while (next_chunk_ < num_chunks_) {
    int64_t c = next_chunk_++;
    int64_t begin = c * job_chunk_, end = std::min(job_n_, begin + job_chunk_);
    lock.unlock();
    try {
      fn(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> g(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    lock.lock();
    ++finished_;
  }
  t_in_worker = false;
  done_.wait(lock, [&] { return finished_ == num_chunks_; });
  job_ = nullptr;
  num_chunks_ = 0;
  if (error_) std::rethrow_exception(error_);
}

}  // namespace kiln
