#include "exec/thread_pool.h"

#include <immintrin.h>

#include <chrono>

#include "core/error.h"

namespace tt {
namespace {

thread_local int tls_thread_index = 0;

inline void cpu_relax() { _mm_pause(); }

// Spin-wait for `done`, yielding the core after a while so an oversubscribed machine still makes progress.
template <typename Pred>
inline void wait_until(Pred done) {
  for (int spins = 0; !done(); ++spins) {
    if (spins < 4096)
      cpu_relax();
    else
      std::this_thread::yield();
  }
}

// What barrier() throws on the threads that did not fail (run() rethrows the first error, never this).
struct JobFailed {};

// How long an idle worker spins for the next job before sleeping: generation steps come back-to-back, and
// waking a sleeping thread costs tens of microseconds.
constexpr int kSpinsBeforeSleep = 200000;

}  // namespace

int ThreadPool::current_thread() { return tls_thread_index; }

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads) {
  if (n_threads < 1) fail("thread count must be at least 1, got {}", n_threads);
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    job_generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run(const std::function<void(int)>& fn) {
  run_async(fn);
  wait();
}

void ThreadPool::run_async(const std::function<void(int)>& fn) {
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  wait();
  start(fn);
  run_share(0);
}

void ThreadPool::wait() {
  if (!job_) return;
  wait_until([&] { return job_remaining_.load(std::memory_order_acquire) == 0; });
  job_ = nullptr;
  if (failed()) std::rethrow_exception(error_);
}

void ThreadPool::start(const std::function<void(int)>& fn) {
  // No thread is in a barrier between jobs: a failed job's arrivals are forgotten here.
  barrier_count_.store(0, std::memory_order_relaxed);
  failed_.store(false, std::memory_order_relaxed);
  error_ = nullptr;
  job_ = &fn;
  job_remaining_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_generation_.fetch_add(1, std::memory_order_release);
  }
  if (sleeping_.load(std::memory_order_acquire) > 0) wake_.notify_all();
}

void ThreadPool::run_share(int ith) {
  try {
    (*job_)(ith);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) error_ = std::current_exception();
    failed_.store(true, std::memory_order_release);
  }
}

void ThreadPool::worker_loop(int ith) {
  tls_thread_index = ith;
  uint64_t seen = 0;
  while (true) {
    int spins = 0;
    uint64_t gen;
    while ((gen = job_generation_.load(std::memory_order_acquire)) == seen) {
      if (++spins < kSpinsBeforeSleep) {
        cpu_relax();
        continue;
      }
      std::unique_lock<std::mutex> lock(mutex_);
      sleeping_.fetch_add(1);
      wake_.wait(lock, [&] { return job_generation_.load() != seen; });
      sleeping_.fetch_sub(1);
    }
    seen = gen;
    if (stop_.load()) return;
    run_share(ith);
    job_remaining_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

bool ThreadPool::arrive() {
  if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) != n_threads_ - 1) return false;
  barrier_count_.store(0, std::memory_order_relaxed);
  barrier_phase_.fetch_add(1, std::memory_order_release);
  return true;
}

void ThreadPool::wait_reading(uint32_t phase, std::span<const uint8_t> ahead) {
  auto released = [&] { return barrier_phase_.load(std::memory_order_acquire) != phase || failed(); };
  // Four lines between looks at the barrier: the loads are independent, so they are in flight together.
  constexpr size_t kLine = 64, kLinesPerLook = 4;
  for (size_t o = 0; o + kLine * kLinesPerLook <= ahead.size() && !released(); o += kLine * kLinesPerLook)
    for (size_t l = 0; l < kLinesPerLook; ++l)
      (void)*static_cast<const volatile uint8_t*>(ahead.data() + o + l * kLine);
  wait_until(released);
  if (barrier_phase_.load(std::memory_order_acquire) == phase) throw JobFailed{};
}

double ThreadPool::round_trip_ns(int round_trips) {
  if (n_threads_ == 1 || round_trips <= 0) return 0;
  alignas(64) std::atomic<int> flag{0};  // 1: thread 1's turn, 0: thread 0's
  std::chrono::steady_clock::duration elapsed{};
  run([&](int ith) {
    if (ith == 0) {
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i <= round_trips; ++i) {
        flag.store(1, std::memory_order_release);
        wait_until([&] { return flag.load(std::memory_order_acquire) == 0; });
        if (i == 0) start = std::chrono::steady_clock::now();  // the first one waits for thread 1 to wake up
      }
      elapsed = std::chrono::steady_clock::now() - start;
    } else if (ith == 1) {
      for (int i = 0; i <= round_trips; ++i) {
        wait_until([&] { return flag.load(std::memory_order_acquire) == 1; });
        flag.store(0, std::memory_order_release);
      }
    }
  });
  return std::chrono::duration<double, std::nano>(elapsed).count() / round_trips;
}

}  // namespace tt
