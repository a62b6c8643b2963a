// What the tracer takes from the engine: a graph's description once per graph structure (GraphSnapshot) and each
// step's raw capture (StepCapture), made on the run's thread and formatted by the tracer's writer thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/ops.h"
#include "exec/executor.h"
#include "sampling/sampler.h"
#include "trace/records.h"

namespace tt {

// One graph structure (graphs/graph-<id>.json) as the trace describes it. Immutable once made: the writer thread
// reads it while the run's thread goes on.
struct GraphSnapshot {
  int id = 0;
  // Node i's record as first seen (op, layer, placement; no step fields, names in names[name_at[i]...]: output, then
  // inputs). Placement of the nodes in `variable` changes from step to step and comes with each step's capture.
  std::vector<trace::OpRecord> records;
  std::vector<std::string> names;
  std::vector<uint32_t> name_at;
  std::vector<uint32_t> variable;  // nodes reading or writing the KV cache or looking up token rows
  // The allocation plan (the same for every step of the graph): an arena event at a node's start or end.
  struct Event {
    uint32_t node;
    bool alloc, reuse;
    uint64_t offset, bytes;
    std::string tensor;
  };
  std::vector<Event> events;
  uint64_t activation_peak = 0;  // live arena bytes at the plan's peak
  std::string activation_peak_tensor;
};

// A buffer event other than the plan's: a static buffer (before the first step) or the arena or scratch growing.
struct ExplicitBufferEvent {
  uint64_t t_ns;
  uint32_t step;
  Pool pool;
  int32_t buffer_id;
  uint64_t bytes;
  std::string name;
};

// One step as the run's thread leaves it. Reused: its vectors keep their capacity from step to step.
struct StepCapture {
  const GraphSnapshot* graph = nullptr;
  int n_threads = 0;
  trace::StepMarker marker;  // ended; times in ns since the run's start
  // [thread * n_nodes + node], in tick_count() units (see ExecObserver::span_slots); ticks map linearly to ns between
  // the two readings taken together before and after the graph ran.
  std::vector<WorkerSpan> spans;
  uint64_t ticks_before = 0, ns_before = 0, ticks_after = 0, ns_after = 0;
  std::vector<trace::OpRecord> placements;  // graph->variable's nodes this step, in order
  std::vector<trace::ValueStats> stats;     // [node], with --trace-values or --check-finite
  // --io-trace: [node] the model-file ranges' residency (thread 0), [thread * n_nodes + node] each worker's counters.
  std::vector<std::vector<trace::IoRange>> io_ranges;
  std::vector<trace::IoWorker> io_workers;
  std::vector<ExplicitBufferEvent> buffer_events;  // since the previous step
  uint64_t arena_bytes = 0, scratch_bytes = 0, static_bytes = 0;
  // For the step's line.
  std::vector<int32_t> input_tokens;
  SampleResult sampled;
  bool end_of_generation = false;
  uint64_t eval_start_ns = 0, eval_end_ns = 0;  // StepOutcome's, since the run's start
  std::vector<float> logits, hidden;            // copies
};

}  // namespace tt
