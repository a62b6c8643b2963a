// The replacement-policy engine shared by the offline cache simulation (analysis::simulate_cache) and the runtime
// weight cache (`run --weight-budget`, model/weight_store.h): one access at a time, it says whether the object was
// resident and which objects to evict to bring it in. Both use this one class, so a run's measured hit rate equals
// the simulation of its access stream by construction.
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
//        go to the least recently used). Optimal for equal-sized objects (page granularity). Needs the future: the
//        index of each access's next demand use (next_use of the whole stream).
// An object larger than the whole cache is never cached: every access to it is a miss.
//
// Prefetch accesses load an object ahead of its use: one not resident is brought in as a miss would bring it
// (evicting by the policy) but counts as a prefetch, not as a demand access, hit or miss; one resident already is left
// as it is. A prefetched object counts as used once so far only when a demand access hits it (LFU counts it 0 uses
// until then; LRU-2 does not count the prefetch as a use). OPT's next use of an object is its next demand access.
//
// Pinned objects (the runtime's units a running op reads) are never evicted; the policy's next choice goes instead.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace tt::cache {

enum class Policy { LRU, LFU, FIFO, LRU2, LEAST_STALE, OPT };
const char* policy_name(Policy p);
std::optional<Policy> policy_from_name(const std::string& name);

struct Access {
  uint64_t key = 0;       // object id (page index, tensor offset, weight unit, ...)
  uint64_t bytes = 0;     // object size; an object keeps the size of its first access
  uint32_t phase = 0;     // position in the access cycle (the layer), for LEAST_STALE; fixed per object
  bool prefetch = false;  // a prefetch, not a demand access (see above)
};

// For each access, the index of the next demand access to the same key (stream.size() when none): OPT's future.
std::vector<size_t> next_use(const std::vector<Access>& stream);

// What one access did.
struct Outcome {
  bool hit = false;               // demand access: the object was resident
  bool loaded = false;            // the object was brought in (a miss or a prefetch that loaded it)
  bool first = false;             // demand access: the first to this key
  bool useful = false;            // demand hit on an object a prefetch brought in, its first use
  std::vector<uint64_t> evicted;  // objects evicted to make room, in eviction order
};

class PolicyCache {
 public:
  // n_phases: LEAST_STALE's phases are [0, n_phases) (others ignore it); next: OPT's next_use of the stream to come
  // (OPT needs it; access t is the t-th call to access()).
  PolicyCache(Policy policy, uint64_t capacity, uint32_t n_phases = 1, std::vector<size_t> next = {});

  // One access; the returned outcome is valid until the next call.
  const Outcome& access(const Access& a);
  // A pinned object is not evicted while pinned (pins do not nest).
  void pin(uint64_t key) { pinned_.insert(key); }
  void unpin(uint64_t key) { pinned_.erase(key); }
  bool resident(uint64_t key) const { return resident_.count(key) != 0; }
  uint64_t used_bytes() const { return used_; }
  uint64_t capacity() const { return capacity_; }
  Policy policy() const { return policy_; }
  size_t accesses_so_far() const { return t_; }

 private:
  using Prio = std::tuple<uint64_t, uint64_t, uint64_t>;  // p1, p2, key: the smallest is evicted first
  struct Entry {
    uint64_t bytes = 0, inserted = 0, last = 0, count = 0, next = 0;
    uint64_t before_last = 0;  // 1 + time of the use before `last`, 0 when none (LRU-2)
    uint64_t pass = 0;         // the pass of `last` (LEAST_STALE)
    uint32_t phase = 0;
    bool prefetched = false;     // brought in by a prefetch, not yet used
    uint64_t demand_before = 0;  // prefetched: 1 + time of its latest demand use before, 0 when none
  };
  Prio prio(uint64_t key, const Entry& e) const;
  std::set<Prio>& order_of(const Entry& e);
  // The first key of an order that is not pinned (nullopt: none).
  std::optional<Prio> first_unpinned(const std::set<Prio>& order) const;
  uint64_t victim(uint32_t phase) const;
  uint64_t next_of(size_t t) const;
  void insert(const Access& a, uint64_t previous, bool prefetch);

  Policy policy_;
  uint64_t capacity_;
  uint32_t n_phases_;
  std::vector<size_t> next_;
  uint64_t t_ = 0;     // accesses so far
  uint64_t pass_ = 0;  // passes begun before the current one (a pass: phases not decreasing)
  uint32_t last_phase_ = 0;
  uint64_t used_ = 0;
  std::unordered_map<uint64_t, Entry> resident_;
  std::unordered_map<uint64_t, uint64_t> last_use_;  // every key seen: 1 + time of its latest demand use
  std::vector<std::set<Prio>> orders_;               // LEAST_STALE: one per phase (each LRU); else one
  std::unordered_set<uint64_t> pinned_;
  Outcome out_;
};

// Replays demand accesses made the weight store's way (model/weight_store.h): one op's units in turn, each pinned
// from its access until the op ends. group[i] names the op of access i (consecutive equal values: one op). Returns
// per access whether it hit: a run's own load records replayed so give its hits exactly. used_after (when given)
// gets per access the cache's resident bytes once that access was served (its evictions and load done).
std::vector<bool> replay_pinned(PolicyCache& cache, const std::vector<Access>& stream,
                                const std::vector<uint64_t>& group, std::vector<uint64_t>* used_after = nullptr);

// "256K", "1M", "64M", "2G", "4096" -> bytes (K/M/G are binary). Throws tt::Error.
uint64_t parse_size(const std::string& text);

}  // namespace tt::cache
