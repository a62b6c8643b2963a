#include "analysis/bandwidth.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "analysis/sample_stats.h"
#include "core/clock.h"
#include "core/error.h"
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

// On huge pages, as the weights are read (FileResidency::IN_MEMORY): on 4 KiB pages the probe measures TLB misses.
ReadProbe::ReadProbe(uint64_t array_bytes)
    : memory_(std::make_unique<HugePageMemory>(std::max<uint64_t>(array_bytes / 8 * 8, 8))) {
  uint64_t* data = reinterpret_cast<uint64_t*>(memory_->data());
  for (size_t i = 0; i < memory_->size() / 8; ++i) data[i] = i;
}
ReadProbe::~ReadProbe() = default;

uint64_t ReadProbe::array_bytes() const { return memory_->size(); }

double ReadProbe::bytes_per_s(int threads) {
  return measure(reinterpret_cast<const uint64_t*>(memory_->data()), array_bytes() / 8, std::max(1, threads));
}

RoofShare roof_share(std::span<const double> tokens_per_s, std::span<const double> roofs, uint64_t bytes_per_token) {
  TT_CHECK(!roofs.empty() && roofs.size() == tokens_per_s.size(), "{} repetitions against {} probe reads",
           tokens_per_s.size(), roofs.size());
  std::vector<double> shares;
  for (size_t r = 0; r < roofs.size(); ++r) shares.push_back(tokens_per_s[r] * bytes_per_token / roofs[r]);
  const auto [low, high] = std::minmax_element(shares.begin(), shares.end());
  const auto [slow, fast] = std::minmax_element(roofs.begin(), roofs.end());
  return {.reads_median = summarize(tokens_per_s).median * bytes_per_token,
          .share_median = summarize(shares).median,
          .share_low = *low,
          .share_high = *high,
          .roof_median = summarize(roofs).median,
          .roof_low = *slow,
          .roof_high = *fast};
}

bool streams_from_memory(uint64_t bytes, int64_t last_level_cache) {
  return last_level_cache <= 0 || bytes > static_cast<uint64_t>(last_level_cache);
}

int64_t last_level_cache_bytes() {
  return std::max<int64_t>({::sysconf(_SC_LEVEL3_CACHE_SIZE), ::sysconf(_SC_LEVEL2_CACHE_SIZE), 0});
}

const Bandwidth& measured_bandwidth(int threads, uint64_t array_bytes) {
  static std::mutex mu;
  static std::map<std::pair<int, uint64_t>, Bandwidth> cache;
  std::lock_guard<std::mutex> lock(mu);
  threads = std::max(1, threads);
  auto it = cache.find({threads, array_bytes});
  if (it != cache.end()) return it->second;
  ReadProbe probe(array_bytes);
  Bandwidth b;
  b.threads = threads;
  b.array_bytes = probe.array_bytes();
  b.single_thread_bytes_per_s = probe.bytes_per_s(1);
  b.multi_thread_bytes_per_s = threads > 1 ? probe.bytes_per_s(threads) : b.single_thread_bytes_per_s;
  return cache.emplace(std::make_pair(threads, array_bytes), b).first->second;
}

}  // namespace tt::analysis
