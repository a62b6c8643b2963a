// `run --weight-budget`: the model's weights served from storage through a cache of a fixed number of bytes.
//
// The store reserves one anonymous mapping (address space only) and lays every weight unit out page-aligned in it:
// each dense tensor whole (but rope_freqs, a ROPE parameter, which stays in the file mapping), each expert's slab of a
// 3-D *_exps tensor separately (Tensor::expert_stride), the embedding whole. The weights' Tensor::data point into it
// instead of the file mapping. Before a node runs (the executor's NodeResidency hook) its units are made resident and
// pinned: a unit not resident is read with pread (O_DIRECT with direct_io) after making its pages writable; to make
// room the cache's policy (cache::PolicyCache, the engine the simulation uses) names units to evict, whose pages are
// dropped (MADV_DONTNEED) and protected (PROT_NONE), so the resident set is real and a read of an evicted unit faults
// instead of computing on stale bytes. The budget counts resident units' page-rounded bytes; it must hold what one node
// needs at once (check()).
#pragma once

#include <cstdint>
#include <string>
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

struct WeightStoreOptions {
  std::string budget;  // bytes with K/M/G ("512M") or a percent of the weights' unit bytes ("50%")
  cache::Policy policy = cache::Policy::LRU;
  bool direct_io = false;
  // OPT: the demand stream to come, as (tensor, expert or -1) units (another run's loads, `opt-from:RUN`); this
  // run's accesses must follow it.
  std::vector<std::pair<std::string, int32_t>> future;
};

// One demand access to a unit by a node: a hit, or a miss and its read.
struct WeightAccess {
  uint32_t unit = 0;
  uint32_t node = 0;                  // the node that needed it
  uint64_t start_ns = 0, end_ns = 0;  // now_ns() around the read (a hit: equal)
  bool hit = false;
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
  // Accesses since the last call, moved into `out` (cleared first). Only kept once keep_accesses() was called.
  void take_accesses(std::vector<WeightAccess>& out);
  void keep_accesses() { keep_ = true; }

  struct Totals {
    uint64_t accesses = 0, hits = 0, misses = 0, evictions = 0;
    uint64_t bytes_read = 0;  // file bytes read
    uint64_t read_ns = 0;     // time in reads (the nodes' stall)
    uint64_t peak_resident_bytes = 0;
  };
  const Totals& totals() const { return totals_; }
  uint64_t resident_bytes() const { return cache_.used_bytes(); }
  // The mapping's pages the kernel holds now (mincore), in bytes: what the process really uses for weights.
  uint64_t measured_resident_bytes() const;
  // After the run: an `opt-from` future that was not followed to its end is an error.
  void finish() const;

 private:
  void load(const Unit& u);
  void drop(const Unit& u);
  const Unit* unit_at(uint64_t file_offset) const;  // the unit holding that file byte (null: none)
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
  std::vector<WeightAccess> accesses_;
  bool keep_ = false;
  uint8_t* bounce_ = nullptr;  // direct_io: aligned buffer for reads that do not start on a block
  uint64_t bounce_bytes_ = 0;
  Totals totals_;
};

}  // namespace tt
