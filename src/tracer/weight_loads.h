// The tracer's part for `run --weight-budget`: each step's accesses of the weight store (model/weight_store.h) as
// WEIGHT_LOAD records, and the step's totals for its steps.jsonl line.
#pragma once

#include <cstdint>
#include <vector>

#include "model/weight_store.h"
#include "trace/json_line.h"
#include "trace/trace_file.h"

namespace tt {

// A step's weight-cache totals (steps.jsonl: weight_hits, weight_misses, weight_bytes_read (demand and prefetch
// reads), weight_stall_ns (nodes' waits), weight_prefetches, weight_prefetch_hits).
struct WeightStepTotals {
  uint64_t hits = 0, misses = 0, bytes_read = 0, stall_ns = 0, prefetches = 0, prefetch_hits = 0;
  void write(JsonLine& j) const;
};

class WeightLoadRecorder {
 public:
  // Asks the store to keep its accesses; t0_ns: the run's start (records are relative to it).
  WeightLoadRecorder(WeightStore& store, uint64_t t0_ns) : store_(store), t0_(t0_ns) { store.keep_accesses(); }
  // At a step's end: takes the step's accesses from the store and returns their totals.
  WeightStepTotals take_step();
  // Writes the accesses take_step() took as WEIGHT_LOAD records of `step`.
  void write(trace::TraceWriter& writer, uint32_t step) const;

 private:
  WeightStore& store_;
  uint64_t t0_;
  std::vector<WeightAccess> accesses_;
};

}  // namespace tt
