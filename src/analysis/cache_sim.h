// Cache simulation: replays a stream of accesses to objects (file pages or whole tensors) against a cache of a
// given capacity in bytes under one replacement policy, and counts misses and the bytes they read from storage.
// The policies and their prefetch semantics are cache::PolicyCache's (src/cache/policy_cache.h), the engine the
// runtime weight cache uses too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cache/policy_cache.h"

namespace tt::analysis {

using CachePolicy = cache::Policy;
using cache::Access;
using cache::next_use;
using cache::policy_from_name;
using cache::policy_name;

struct CacheResult {
  CachePolicy policy = CachePolicy::LRU;
  uint64_t capacity = 0;
  uint64_t accesses = 0, hits = 0, misses = 0;
  uint64_t bytes_accessed = 0, bytes_missed = 0;  // bytes_missed: read from storage
  uint64_t cold_misses = 0;                       // first access to an object
  uint64_t evictions = 0;
  // Prefetch accesses that loaded their object, its bytes, and the prefetched objects a demand access then hit.
  uint64_t prefetches = 0, prefetch_bytes = 0, useful_prefetches = 0;
  double miss_ratio() const { return accesses ? static_cast<double>(misses) / accesses : 0.0; }
};

CacheResult simulate_cache(const std::vector<Access>& stream, uint64_t capacity, CachePolicy policy);

// LRU stack (reuse) distance of each access, in bytes: the total size of the distinct objects accessed since the
// previous access to the same key (UINT64_MAX for a first access). For demand streams (no prefetch accesses). An LRU
// cache of capacity C hits exactly the accesses whose distance + own size <= C (for objects of equal size).
std::vector<uint64_t> reuse_distances(const std::vector<Access>& stream);

using cache::parse_size;
std::string format_bytes(uint64_t bytes);  // "1.5 MiB"

}  // namespace tt::analysis
