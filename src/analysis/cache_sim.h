// Cache simulation: replays a stream of accesses to objects (file pages or whole tensors) against a cache of a
// given capacity in bytes under one replacement policy, and counts misses and the bytes they read from storage.
//
// Policies (demand caching: a missed object is always brought in, then objects are evicted until it fits):
//   LRU  evicts the least recently used object.
//   LFU  evicts the object used least often since it was brought in; ties go to the least recently used.
//   FIFO evicts the object brought in earliest (hits do not refresh it).
//   LRU-2 (LRU-K with K = 2, O'Neil et al.): evicts the object whose second most recent use is oldest; an object
//        used once so far goes first (ties: least recently used). Uses are remembered after eviction.
//   LEAST-STALE for accesses that pass through phases 0..P-1 in order, pass after pass (the layers of a forward pass;
//        a pass ends where the phase goes down): evicts the object last used in the oldest pass (staleness counted in
//        passes, not accesses); among those, the one of the phase passed most recently (the current phase first, then
//        the one before it, ...), whose next use is furthest under the cycle, where LRU would evict the lowest layer's,
//        needed first; then the least recently used. tensortrace's rule for SpecMD's Least-Stale (Hoang et al. 2026),
//        which weighs temporal against layer (spatial) locality; with one phase it is LRU.
//   OPT  Belady's MIN: evicts the object whose next use is furthest in the future (never used again first; ties
//        go to the least recently used). Optimal for equal-sized objects (page granularity).
// An object larger than the whole cache is never cached: every access to it is a miss.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tt::analysis {

enum class CachePolicy { LRU, LFU, FIFO, LRU2, LEAST_STALE, OPT };
const char* policy_name(CachePolicy p);
std::optional<CachePolicy> policy_from_name(const std::string& name);

struct Access {
  uint64_t key = 0;    // object id (page index, tensor offset, ...)
  uint64_t bytes = 0;  // object size; an object keeps the size of its first access
  uint32_t phase = 0;  // position in the access cycle (the layer), for LEAST_STALE; fixed per object
};

struct CacheResult {
  CachePolicy policy = CachePolicy::LRU;
  uint64_t capacity = 0;
  uint64_t accesses = 0, hits = 0, misses = 0;
  uint64_t bytes_accessed = 0, bytes_missed = 0;  // bytes_missed: read from storage
  uint64_t cold_misses = 0;                       // first access to an object
  uint64_t evictions = 0;
  double miss_ratio() const { return accesses ? static_cast<double>(misses) / accesses : 0.0; }
};

CacheResult simulate_cache(const std::vector<Access>& stream, uint64_t capacity, CachePolicy policy);

// For each access, the index of the next access to the same key (stream.size() when none).
std::vector<size_t> next_use(const std::vector<Access>& stream);

// LRU stack (reuse) distance of each access, in bytes: the total size of the distinct objects accessed since the
// previous access to the same key (UINT64_MAX for a first access). An LRU cache of capacity C hits exactly the
// accesses whose distance + own size <= C (for objects of equal size).
std::vector<uint64_t> reuse_distances(const std::vector<Access>& stream);

// "256K", "1M", "64M", "2G", "4096" -> bytes (K/M/G are binary). Throws tt::Error.
uint64_t parse_size(const std::string& text);
std::string format_bytes(uint64_t bytes);  // "1.5 MiB"

}  // namespace tt::analysis
