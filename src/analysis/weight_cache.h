// `analyze` on a `run --weight-budget` run: the run's weight cache beside the replay of its own access stream (its
// WEIGHT_LOAD records) under the same policy and capacity through the same engine (cache::PolicyCache, pinned op by
// op as the run pins). Without prefetch the hits must be equal: a difference is a bug.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "trace/run_data.h"

namespace tt::analysis {

struct WeightCacheSection {
  std::string policy;
  uint64_t capacity = 0, accesses = 0;
  uint64_t measured_hits = 0, simulated_hits = 0;
  uint64_t measured_bytes_read = 0, simulated_bytes_read = 0;
  uint64_t stall_ns = 0;
  double read_bytes_per_s = 0;
  // Per WEIGHT_LOAD record, the replay's resident bytes (page-rounded units, as the budget counts them) once that
  // access was served: the cache's occupancy over the run (the run's own cache without prefetch, where they agree).
  std::vector<uint64_t> resident_after;
  double hit_rate(uint64_t hits) const { return accesses ? static_cast<double>(hits) / accesses : 0.0; }
};

// nullopt for a run without a weight budget.
std::optional<WeightCacheSection> weight_cache_section(const RunData& run);
nlohmann::json weight_cache_json(const WeightCacheSection& s);
std::string weight_cache_text(const WeightCacheSection& s);

}  // namespace tt::analysis
