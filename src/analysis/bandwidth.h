// The machine's memory read bandwidth, measured once per process: a vectorised sum over a large array that does
// not fit in the caches, on one thread and on n threads (each reading its own share).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

namespace tt::analysis {

struct Bandwidth {
  double single_thread_bytes_per_s = 0;
  double multi_thread_bytes_per_s = 0;
  int threads = 1;
  uint64_t array_bytes = 0;
  nlohmann::json to_json() const;
};

// Measured on the first call (about 0.2 s for the default array), then cached for the process (per thread count
// and array size). An array well beyond the last-level cache (bench uses 2 GiB) measures main memory alone.
constexpr uint64_t kDefaultBandwidthArrayBytes = 128ull << 20;
const Bandwidth& measured_bandwidth(int threads, uint64_t array_bytes = kDefaultBandwidthArrayBytes);

}  // namespace tt::analysis
