// A persistent pool of worker threads. run(fn) executes fn(ith) on every thread (the caller is thread 0) and
// returns when all have finished (run_async: when the caller's share has, the others' waited for later); inside fn,
// barrier() synchronises all threads. No allocation, locking or
// thread creation per op: workers spin briefly between jobs, then sleep. An exception thrown by fn on any thread
// ends the job on all of them: their barrier() calls throw from then on, so they leave fn too (they would otherwise
// wait for the failed thread forever), and run() rethrows the first error once every thread has left fn.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace tt {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  void run(const std::function<void(int ith)>& fn);
  // fn(ith) on every thread as run(), but returns when the caller's share fn(0) is done: the other threads' shares
  // go on until the next run() or wait(), which wait for them (and rethrow their first error). fn must live until
  // then. For work that may overlap what the caller does next, e.g. the tracer's step line beside the next step's
  // preparation.
  void run_async(const std::function<void(int ith)>& fn);
  // Waits for the shares run_async left running; rethrows the first error of that job.
  void wait();
  // Waits for every thread; throws (ending the caller's share) once fn has thrown on another thread.
  void barrier() {
    barrier([] { return std::span<const uint8_t>{}; });
  }
  // barrier(), but a thread that must wait reads the bytes ahead() names meanwhile, a cache line at a time, until
  // the others arrive: bytes it streams next (the next product's weights, Executor::run) are then in its caches
  // instead of on their way from memory. ahead() is called only by threads that wait: the last one to arrive
  // releases the others without it.
  template <typename Ahead>
  void barrier(Ahead ahead) {
    if (n_threads_ == 1) return;
    const uint32_t phase = barrier_phase_.load(std::memory_order_acquire);
    if (!arrive()) wait_reading(phase, ahead());
  }
  // Small integer id of the calling thread within the pool (0 for the caller of run()).
  static int current_thread();
  // Threads 0 and 1 pass a flag back and forth `round_trips` times: the mean time of one round trip in ns (0 with
  // one thread). What every barrier pays; on a VM it changes with where the host places the virtual CPUs
  // (docs/performance.md).
  double round_trip_ns(int round_trips);

 private:
  void worker_loop(int ith);
  void start(const std::function<void(int)>& fn);  // hands fn to the workers
  void run_share(int ith);                         // fn(ith), recording its exception
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  bool arrive();  // at the barrier; true for the last thread, which has released the others
  void wait_reading(uint32_t phase, std::span<const uint8_t> ahead);  // until phase ends

  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> job_generation_{0};
  std::atomic<int> job_remaining_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;  // the first one, under mutex_
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<int> sleeping_{0};
  // Barrier state: arrivals count up; the last arrival bumps the phase.
  alignas(64) std::atomic<int> barrier_count_{0};
  alignas(64) std::atomic<uint32_t> barrier_phase_{0};
};

}  // namespace tt
