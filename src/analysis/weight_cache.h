// `analyze` on a `run --weight-budget` run: the run's weight cache beside the replay of its own access stream (its
// WEIGHT_LOAD records) under the same policy and capacity through the same engine (cache::PolicyCache, pinned op by
// op as the run pins). Without prefetch the hits must be equal: a difference is a bug. With prefetch the run's reads
// overlap compute, so the replay of the same stream (simulate_cache with its prefetch accesses where the cache saw
// them) and of its demand accesses alone (no prefetch) are shown beside it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analysis/cache_sim.h"
#include "trace/run_data.h"

namespace tt::analysis {

// `bench --io`'s rates of the model file's storage (bytes/s), to set a run's achieved read rate against.
struct StorageRates {
  double sequential = 0, random_4k = 0;
  std::string method;  // "O_DIRECT" or "fadvise(DONTNEED)"
};

struct WeightCacheSection {
  std::string policy, prefetch;
  uint64_t capacity = 0, accesses = 0, steps = 0;
  uint64_t measured_hits = 0, simulated_hits = 0;
  uint64_t measured_bytes_read = 0, simulated_bytes_read = 0;      // demand misses' bytes (+ prefetch reads, measured)
  uint64_t stall_ns = 0;                                           // nodes' waits: reads and prefetches in flight
  uint64_t prefetches = 0, prefetch_bytes = 0, prefetch_hits = 0;  // measured
  // The stream replayed with its prefetch accesses and without them (simulate_cache, no pins).
  CacheResult replay_prefetch, replay_demand;
  double read_bytes_per_s = 0;
  // Per WEIGHT_LOAD record, the replay's resident bytes (page-rounded units, as the budget counts them) once that
  // access was served: the cache's occupancy over the run (the run's own cache without prefetch, where they agree).
  std::vector<uint64_t> resident_after;
  std::optional<StorageRates> storage;  // when given (analyze --io-rates) or recorded
  double hit_rate(uint64_t hits) const { return accesses ? static_cast<double>(hits) / accesses : 0.0; }
};

// The access stream of a budgeted run's WEIGHT_LOAD records, as the store keyed (by file offset) and phased them
// (0 the embedding, 1 + layer, n_phases - 1 the rest); prefetch reads are prefetch accesses.
std::vector<cache::Access> weight_access_stream(const RunData& run, uint64_t page_bytes, uint32_t n_phases);

// nullopt for a run without a weight budget.
std::optional<WeightCacheSection> weight_cache_section(const RunData& run,
                                                       const std::optional<StorageRates>& storage = std::nullopt);
// Reads `bench --io --json`'s output (its "io" object); throws tt::Error naming what is missing.
StorageRates read_storage_rates(const std::string& path);
nlohmann::json weight_cache_json(const WeightCacheSection& s);
std::string weight_cache_text(const WeightCacheSection& s);

}  // namespace tt::analysis
