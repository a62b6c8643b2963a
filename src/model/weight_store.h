// `run --weight-budget`: the model's weights served from storage through a cache of a fixed number of bytes.
//
// The store reserves one anonymous mapping (address space only) and lays every weight unit out page-aligned in it:
// each dense tensor whole (but rope_freqs, a ROPE parameter, which stays in the file mapping), each expert's slab of a
// 3-D *_exps tensor separately (Tensor::expert_stride), the embedding whole. The weights' Tensor::data point into it
// instead of the file mapping. The embedding is cut into groups of whole rows that fill whole pages (a GET_ROWS needs
// only its tokens' rows; its region layout stays contiguous). Before a node runs (the executor's NodeResidency hook)
// its units are made resident and pinned: a unit not resident is read with pread (O_DIRECT with direct_io) after making
// its pages writable; to make room the cache's policy (cache::PolicyCache, the engine the simulation uses) names units
// to evict, whose pages are dropped (MADV_DONTNEED) and protected (PROT_NONE), so the resident set is real and a read
// of an evicted unit faults instead of computing on stale bytes. The budget counts resident units' page-rounded bytes;
// it must hold what one node needs at once (check()).
//
// A prefetcher (WeightStoreOptions::prefetch) loads units ahead of their use on its own thread, one read at a time,
// from a queue of at most one layer's units: it goes through the same cache (prefetch accesses: cache::PolicyCache),
// never evicts a pinned unit and pins a unit while reading it. A node needing a unit being prefetched waits for that
// read (a hit: the unit is read once); one needing a unit that would not fit beside the units pinned by reads in
// flight waits for them. Prefetch reads and demand accesses are kept in the order the cache saw them.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cache/policy_cache.h"
#include "exec/executor.h"
#include "model/model.h"

namespace tt {

// A --weight-budget value: bytes, or a percent of the weights' unit bytes. Throws tt::Error naming a bad one.
struct WeightBudget {
  uint64_t bytes = 0;  // when not a percent
  double percent = 0;  // in (0, 100]; 0: bytes
  static WeightBudget parse(const std::string& text);
  uint64_t of(uint64_t all) const;
};

// A unit as a run's WEIGHT_LOAD records name it.
struct RecordedUnit {
  std::string tensor;
  int32_t expert = -1;
  uint64_t offset = 0;  // absolute file offset
};

struct WeightStoreOptions {
  std::string budget;  // bytes with K/M/G ("512M") or a percent of the weights' unit bytes ("50%")
  cache::Policy policy = cache::Policy::LRU;
  bool direct_io = false;
  // OPT: the demand stream to come (another run's demand accesses, `opt-from:RUN`); this run's must follow it.
  std::vector<RecordedUnit> future;
  // Prefetch: NEXT_LAYER loads the next layer's units as a layer starts (a mixture-of-experts layer's experts as the
  // graph's ffn_moe_pred_topk nodes predict them, once computed: the engine must run with moe_predict); RECORDED
  // loads the units of `recorded` (another run's demand accesses) ahead of this run's accesses, at most one layer's
  // units ahead.
  enum class Prefetch { NONE, NEXT_LAYER, RECORDED } prefetch = Prefetch::NONE;
  std::vector<RecordedUnit> recorded;
};

// One access to a unit, in the cache's order: a node's demand (a hit, or a miss and its read) or a prefetch read.
struct WeightAccess {
  uint32_t unit = 0;
  uint32_t node = 0;                  // the node that needed it (a prefetch: the node running when it was issued)
  uint64_t start_ns = 0, end_ns = 0;  // now_ns() around the read or the wait (a hit not waiting: equal)
  uint64_t wait_ns = 0;               // demand: how long the node waited (its read, or a prefetch in flight)
  bool hit = false, prefetch = false;
  bool prefetch_hit = false;  // a demand hit on a prefetched unit, its first use since
  bool done = true;           // a prefetch's read has ended (end_ns set)
};

class WeightStore final : public NodeResidency {
 public:
  struct Unit {
    const Tensor* tensor = nullptr;
    int32_t expert = -1;         // -1: the whole tensor
    uint64_t file_offset = 0;    // absolute
    uint64_t bytes = 0;          // in the file
    uint64_t region_offset = 0;  // in the mapping, page-aligned
    uint64_t region_bytes = 0;   // bytes rounded up to whole pages: what the budget counts
    uint32_t phase = 0;          // the cache's phase: 0 the embedding, 1 + layer, n_layer + 1 the rest
  };
  // Points model's weights into the store's mapping; throws tt::Error for a bad budget or a file it cannot open.
  // Starts the prefetcher's thread when options.prefetch is set.
  WeightStore(Model& model, const WeightStoreOptions& options);
  ~WeightStore() override;
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  // Up front: refuses a budget below what one node needs at once in a step of batch_tokens tokens (a weight's
  // units; a MUL_MAT_ID as many experts as the batch may choose). check() verifies each graph exactly.
  void require(int64_t batch_tokens) const;
  void check(const Graph& g) override;
  void acquire(int node, const Node& n) override;
  void release(int node, const Node& n) override;

  const std::vector<Unit>& units() const { return units_; }
  // The unit of a tensor name and expert (-1: whole), or -1.
  int64_t find_unit(const std::string& tensor, int32_t expert) const;
  uint64_t budget() const { return budget_; }
  uint64_t unit_bytes() const { return region_size_; }  // all units, page-rounded (100% of a percent budget)
  const WeightStoreOptions& options() const { return options_; }
  uint32_t n_phases() const { return n_phases_; }
  uint64_t page_bytes() const { return page_; }
  // Accesses since the last call, moved into `out` (cleared first), up to the first prefetch whose read is still in
  // flight (it and the ones after it come with a later call). Only kept once keep_accesses() was called.
  void take_accesses(std::vector<WeightAccess>& out);
  void keep_accesses() { keep_ = true; }

  struct Totals {
    uint64_t accesses = 0, hits = 0, misses = 0, evictions = 0;
    uint64_t bytes_read = 0;  // file bytes read
    uint64_t read_ns = 0;     // time in reads (demand and prefetch)
    uint64_t stall_ns = 0;    // time nodes waited for weights (their reads, prefetches in flight, room)
    uint64_t prefetches = 0, prefetch_bytes = 0;  // prefetch reads (bytes also in bytes_read)
    uint64_t prefetch_hits = 0;                   // demand hits on a prefetched unit, its first use
    uint64_t peak_resident_bytes = 0;
  };
  Totals totals() const;
  uint64_t resident_bytes() const;
  // The mapping's pages the kernel holds now (mincore), in bytes: what the process really uses for weights.
  uint64_t measured_resident_bytes() const;
  // After the run: stops the prefetcher; an `opt-from` future that was not followed to its end is an error.
  void finish();

 private:
  enum State : uint8_t { ABSENT, LOADING, RESIDENT };
  // bounce: the calling thread's O_DIRECT window (allocated on first use).
  void load(const Unit& u, uint8_t*& bounce);
  void drop(const Unit& u);
  // The cache's access to a unit with mu_ held: evictions dropped; a unit brought in is LOADING and pinned.
  const cache::Outcome& cache_access(uint32_t key, bool prefetch);
  void pin(uint32_t key);
  void unpin(uint32_t key);
  void enqueue(uint32_t key);  // mu_ held
  void on_node(int node);      // mu_ held: NEXT_LAYER / RECORDED requests as node starts
  void prefetch_loop();
  void stop_prefetcher();
  const Unit* unit_at(uint64_t file_offset) const;
  void add_unit(const Tensor* t, int32_t expert, uint64_t file_offset, uint64_t bytes, uint64_t region_offset,
                uint64_t region_bytes, uint32_t phase);
  // The unit a recorded access names (`what`: the option, for the error).
  uint32_t recorded_unit(const std::string& tensor, int32_t expert, uint64_t offset,
                         const char* what) const;  // the unit holding that file byte (null: none)
  // Units node n reads now (its MUL_MAT_ID's resolved experts), ascending and distinct, into `out`; skip_input:
  // an input whose reads are left out (-1: none).
  void units_of(const Node& n, std::vector<uint32_t>& out, int skip_input = -1) const;

  Model& model_;
  WeightStoreOptions options_;
  std::vector<Unit> units_;
  std::vector<std::pair<uint64_t, uint32_t>> by_offset_;  // (file offset, unit), ascending
  uint8_t* region_ = nullptr;
  uint64_t region_size_ = 0;
  uint64_t budget_ = 0;
  uint32_t n_phases_ = 1;
  int fd_ = -1;
  uint64_t page_ = 4096;
  cache::PolicyCache cache_;
  uint64_t checked_structure_ = 0;  // the graph structure check() last passed (0: none)
  std::vector<uint64_t> future_;    // options_.future as unit keys
  std::vector<uint32_t> pinned_;    // the running node's units
  std::vector<uint32_t> scratch_;
  bool keep_ = false;
  uint8_t* bounce_ = nullptr;           // direct_io: thread 0's aligned buffer for reads that do not start on a block
  uint8_t* prefetch_bounce_ = nullptr;  // the prefetcher's
  Totals totals_;

  // Shared with the prefetcher: everything below, cache_, totals_ and the accesses, under mu_.
  mutable std::mutex mu_;
  std::condition_variable loaded_;  // a read ended
  std::condition_variable work_;    // the queue has units, or stop_
  std::vector<State> state_;        // [unit]
  std::vector<uint16_t> pins_;      // [unit]: the running node's pin and a read's
  uint64_t pinned_bytes_ = 0;
  uint32_t loading_ = 0;  // reads in flight
  std::deque<WeightAccess> accesses_;
  uint64_t taken_ = 0;  // accesses taken before accesses_.front()
  std::exception_ptr prefetch_error_;
  std::deque<uint32_t> queue_;
  std::vector<uint8_t> queued_;  // [unit]
  bool stop_ = false;
  uint32_t running_node_ = 0;
  // NEXT_LAYER: per phase, its units but experts'; per layer, its expert tensors' first units.
  std::vector<std::vector<uint32_t>> phase_units_;
  std::vector<std::vector<uint32_t>> layer_experts_;
  uint32_t current_phase_ = UINT32_MAX;
  const Graph* graph_ = nullptr;
  std::vector<std::pair<uint32_t, int>> predictions_;  // (node, layer predicted) of the current graph, in order
  size_t next_prediction_ = 0;
  // RECORDED: the other run's accesses as units, and how far they were queued.
  std::vector<uint32_t> recorded_;
  size_t recorded_queued_ = 0;
  size_t demand_accesses_ = 0;
  size_t ahead_ = 0;  // units queued ahead at most: the most units of one layer
  std::thread thread_;
};

}  // namespace tt
