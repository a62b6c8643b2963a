// The machine's memory read bandwidth: a vectorised sum over a large array that does not fit in the caches, on one
// thread and on n threads (each reading its own share); measured once per process (measured_bandwidth) or as often
// as asked (ReadProbe). And generation's weight reads against it (roof_share).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>

namespace tt {
class HugePageMemory;
}

namespace tt::analysis {

struct Bandwidth {
  double single_thread_bytes_per_s = 0;
  double multi_thread_bytes_per_s = 0;
  int threads = 1;
  uint64_t array_bytes = 0;
  nlohmann::json to_json() const;
};

// The probe itself, holding its array (on huge pages, written once) so that it can be read again: bench reads
// it after each generation repetition, so that the VM's slow and fast spells fall on the model and its roof alike.
class ReadProbe {
 public:
  explicit ReadProbe(uint64_t array_bytes);  // throws tt::Error when the memory cannot be had
  ~ReadProbe();
  ReadProbe(const ReadProbe&) = delete;
  ReadProbe& operator=(const ReadProbe&) = delete;
  uint64_t array_bytes() const;
  // The best of 3 passes over the whole array, each of `threads` threads reading its own share.
  double bytes_per_s(int threads);

 private:
  std::unique_ptr<HugePageMemory> memory_;
};

// Generation's weight reads against the roof, a repetition at a time: repetition r's tokens/s times the bytes a
// token reads, over the probe read right after it (shares), then their median and range; the probe's median and
// range. Throws tt::Error when the two samples differ in length or are empty.
struct RoofShare {
  double reads_median = 0;                                 // bytes/s: the median repetition's
  double share_median = 0, share_low = 0, share_high = 0;  // reads / roof
  double roof_median = 0, roof_low = 0, roof_high = 0;     // bytes/s
};
RoofShare roof_share(std::span<const double> tokens_per_s, std::span<const double> roofs, uint64_t bytes_per_token);

// Whether `bytes` read a token stream from memory rather than the last-level cache: more than it holds
// (`last_level_cache` bytes; 0 or less when unknown, and then they do).
bool streams_from_memory(uint64_t bytes, int64_t last_level_cache);
int64_t last_level_cache_bytes();  // as the CPU reports it (a VM's may not be the host's); 0 when unknown

// Measured on the first call (about 0.2 s for the default array), then cached for the process (per thread count
// and array size). An array well beyond the last-level cache (bench uses 2 GiB) measures main memory alone.
constexpr uint64_t kDefaultBandwidthArrayBytes = 128ull << 20;
const Bandwidth& measured_bandwidth(int threads, uint64_t array_bytes = kDefaultBandwidthArrayBytes);

}  // namespace tt::analysis
