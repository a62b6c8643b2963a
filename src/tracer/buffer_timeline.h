// The buffer timeline (buffers.json): every allocation and free of each step's activations at its node's start and
// end on the run's thread, the static buffers and the arena's growth, and each step's peak. The steps' node times go
// to a scratch file as they come (memory that grows with the run costs the run more than the write) and are expanded
// into events at the end.
#pragma once

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "trace/run_dir.h"
#include "tracer/step_capture.h"

namespace tt {

class BufferTimeline {
 public:
  BufferTimeline(RunDirWriter& dir, uint64_t run_start_ns);
  // On the writer thread, after OpRecordWriter::write (c's spans in ns since the run's start).
  void write(const StepCapture& c);
  bool wants_flush() const { return node_times_.size() * sizeof(WorkerSpan) >= kFlushBytes; }
  void flush();
  size_t finish();  // writes buffers.json (and removes the scratch file); returns its number of events

 private:
  static constexpr size_t kFlushBytes = 256 << 10;
  static constexpr const char* kNodeTimesFile = "buffer-times.tmp";
  struct StepBuffers {
    uint32_t step;
    const GraphSnapshot* graph;
    uint64_t times_at;    // index of the step's first node time in the scratch file
    uint64_t step_start;  // events of nodes the run's thread did not run
    size_t explicit_end;  // events_ before this step's arena events
    uint64_t arena_bytes, scratch_bytes, static_bytes;
  };
  RunDirWriter& dir_;
  uint64_t t0_;
  std::vector<ExplicitBufferEvent> events_;  // static buffers and growth
  std::vector<StepBuffers> steps_;
  std::vector<WorkerSpan> node_times_;  // thread 0's of the steps since the last flush (ns)
  uint64_t node_times_written_ = 0;
  std::unique_ptr<std::fstream> file_;
};

}  // namespace tt
