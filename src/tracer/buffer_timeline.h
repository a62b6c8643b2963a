// The buffer timeline (buffers.json): static buffers, activation arena and scratch growth, and each step's arena
// allocations and frees (its graph's allocation plan, timed by the node that allocates or frees on the run's thread).
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/ops.h"
#include "exec/executor.h"
#include "graph/graph.h"
#include "trace/run_dir.h"
#include "trace/trace_file.h"
#include "tracer/flush.h"
#include "tracer/graph_catalog.h"

namespace tt {

class BufferTimeline {
 public:
  BufferTimeline(RunDirWriter& dir, trace::TraceWriter& strings, uint64_t run_start_ns);
  // A runtime buffer that exists before the first step (KV cache layers...).
  void record_static_buffer(const std::string& name, Pool pool, int buffer_id, uint64_t bytes);
  // Before step `step` runs g: arena and scratch growth.
  void on_graph_ready(const Graph& g, uint32_t step);
  // After the step: thread 0's span of every node in absolute nanoseconds ({0, 0}: not run there).
  void on_step_end(uint32_t step, const GraphEntry& graph, uint64_t step_start_ns, std::span<const WorkerSpan> node_ns,
                   uint64_t now_ns);
  // Writes buffers.json (removing the node times' scratch file); the event count for run.json.
  size_t finish();

 private:
  struct Event {
    uint64_t t_ns;
    uint32_t step;
    char kind;  // 'a' alloc, 'f' free
    Pool pool;
    int32_t buffer_id;
    uint64_t offset, bytes;
    uint32_t tensor;  // id in the trace's string table
    bool reuse;
  };
  struct Step {
    uint32_t step;
    const GraphEntry* graph;
    size_t times_at;      // index of the step's first node time among all steps'
    uint64_t step_start;  // trace time of the step's start (events of nodes the run thread did not run)
    size_t explicit_end;  // events_ recorded before this step's arena events
    uint64_t arena_bytes, scratch_bytes, static_bytes;
  };
  void flush_node_times();

  RunDirWriter& dir_;
  trace::TraceWriter& strings_;
  uint64_t t0_;
  std::vector<Event> events_;  // static buffers and growth
  std::vector<Step> steps_;
  uint64_t arena_bytes_ = 0, scratch_bytes_ = 0, static_bytes_ = 0;
  // Per step, the run thread's span of every node: the steps since the last flush here, the earlier ones in the
  // scratch file kNodeTimesFile (read back and removed by finish()). Memory that grows with the run costs a step far
  // more than its copy on a VM (first touches of fresh pages, see reserve_touched).
  static constexpr const char* kNodeTimesFile = "buffer-times.tmp";
  std::vector<WorkerSpan> node_times_;
  uint64_t node_times_written_ = 0;
  std::unique_ptr<std::fstream> node_times_file_;
  FlushSchedule flush_;
};

}  // namespace tt
