// A persistent pool of worker threads. run(fn) executes fn(ith) on every thread (the caller is thread 0) and
// returns when all have finished; inside fn, barrier() synchronises all threads. No allocation, locking or
// thread creation per op: workers spin briefly between jobs, then sleep.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tt {

// What idle work checks between its units: whether the wait it fills has ended (its barrier has opened, or the next
// job has come). The default one never asks to stop (work finished outside a wait).
class IdleStop {
 public:
  IdleStop() = default;
  IdleStop(const std::atomic<uint32_t>& phase, uint32_t waiting_phase)
      : phase_(&phase), waiting_phase_(waiting_phase) {}
  bool requested() const { return phase_ != nullptr && phase_->load(std::memory_order_relaxed) != waiting_phase_; }

 private:
  const std::atomic<uint32_t>* phase_ = nullptr;
  uint32_t waiting_phase_ = 0;
};

// Work a thread may do while it waits (at a barrier, or for the next job: ThreadPool::run's `between`) instead of
// spinning: fn(ctx, stop) does short units (a fraction of a microsecond each: a release that comes meanwhile waits for
// the current one) until stop.requested() or none is left, and returns false once none is left. Checking between
// units, not after a fixed batch, keeps both the delay past a release and the work left undone small.
struct IdleWork {
  bool (*fn)(void* ctx, const IdleStop& stop) = nullptr;
  void* ctx = nullptr;
};

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // `between`: work the other threads do once the whole job is done (thread 0's share too: they see its writes)
  // while they wait for the next one, until the next run() or end_between_jobs_work() (its stop is requested then).
  void run(const std::function<void(int ith)>& fn, IdleWork between = {});
  // Stops the last run's between-jobs work and returns once no thread is in it (its owner may then go).
  void end_between_jobs_work();
  void barrier(IdleWork idle = {});
  // Small integer id of the calling thread within the pool (0 for the caller of run()).
  static int current_thread();
  // Threads 0 and 1 pass a flag back and forth `round_trips` times: the mean time of one round trip in ns (0 with
  // one thread). What every barrier pays; on a VM it changes with where the host places the virtual CPUs
  // (docs/performance.md).
  double round_trip_ns(int round_trips);

 private:
  void worker_loop(int ith);

  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> job_generation_{0};
  std::atomic<int> job_remaining_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<int> sleeping_{0};
  // Between-jobs work: the run's (read by the workers at the job's start), the generation whose job thread 0 has
  // finished, the phase its stop watches (bumped by each run() and end_between_jobs_work()) and the workers that may
  // still call it.
  IdleWork between_{};
  alignas(64) std::atomic<uint64_t> job_finished_{0};
  alignas(64) std::atomic<uint32_t> between_phase_{0};
  std::atomic<int> between_active_{0};
  // Barrier state: arrivals count up; the last arrival bumps the phase.
  alignas(64) std::atomic<int> barrier_count_{0};
  alignas(64) std::atomic<uint32_t> barrier_phase_{0};
};

}  // namespace tt
