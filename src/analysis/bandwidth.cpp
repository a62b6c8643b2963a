#include "analysis/bandwidth.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/mapped_file.h"

namespace tt::analysis {

namespace {

// Sum of 64-bit words with independent accumulators (the compiler vectorises it).
__attribute__((noinline)) uint64_t read_sum(const uint64_t* p, size_t n) {
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    a0 += p[i];
    a1 += p[i + 1];
    a2 += p[i + 2];
    a3 += p[i + 3];
    a4 += p[i + 4];
    a5 += p[i + 5];
    a6 += p[i + 6];
    a7 += p[i + 7];
  }
  for (; i < n; ++i) a0 += p[i];
  return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

volatile uint64_t g_sink;

double measure(const uint64_t* data, size_t words, int threads) {
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const uint64_t t0 = now_ns();
    if (threads <= 1) {
      g_sink = read_sum(data, words);
    } else {
      std::vector<std::thread> pool;
      std::vector<uint64_t> sums(threads);
      const size_t share = words / threads;
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          const size_t n = t == threads - 1 ? words - share * t : share;
          sums[t] = read_sum(data + share * t, n);
        });
      for (auto& th : pool) th.join();
      uint64_t s = 0;
      for (uint64_t x : sums) s += x;
      g_sink = s;
    }
    const double secs = (now_ns() - t0) / 1e9;
    best = std::max(best, words * 8.0 / secs);
  }
  return best;
}

}  // namespace

nlohmann::json Bandwidth::to_json() const {
  return {{"single_thread_bytes_per_s", single_thread_bytes_per_s},
          {"multi_thread_bytes_per_s", multi_thread_bytes_per_s},
          {"threads", threads},
          {"array_bytes", array_bytes},
          {"method", fmt::format("best of 3 passes of a vectorised 64-bit sum over a {} MiB array on huge pages",
                                 array_bytes >> 20)}};
}

const Bandwidth& measured_bandwidth(int threads, uint64_t array_bytes) {
  static std::mutex mu;
  static std::map<std::pair<int, uint64_t>, Bandwidth> cache;
  std::lock_guard<std::mutex> lock(mu);
  threads = std::max(1, threads);
  auto it = cache.find({threads, array_bytes});
  if (it != cache.end()) return it->second;
  const size_t bytes = std::max<uint64_t>(array_bytes / 8 * 8, 8);
  // On huge pages, as the weights are read (FileResidency::IN_MEMORY): on 4 KiB pages the probe measures TLB misses.
  HugePageMemory memory(bytes);
  uint64_t* data = reinterpret_cast<uint64_t*>(memory.data());
  for (size_t i = 0; i < bytes / 8; ++i) data[i] = i;
  Bandwidth b;
  b.threads = threads;
  b.array_bytes = bytes;
  b.single_thread_bytes_per_s = measure(data, bytes / 8, 1);
  b.multi_thread_bytes_per_s = threads > 1 ? measure(data, bytes / 8, threads) : b.single_thread_bytes_per_s;
  return cache.emplace(std::make_pair(threads, array_bytes), b).first->second;
}

}  // namespace tt::analysis
