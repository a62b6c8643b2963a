// The op records (trace.bin): per step its begin and end and one OP record per graph node with each worker's share,
// from the step's capture, on the tracer's writer thread.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "trace/trace_file.h"
#include "tracer/step_capture.h"

namespace tt {

class OpRecordWriter {
 public:
  OpRecordWriter(const std::string& path, uint64_t run_start_ns) : writer_(path), t0_(run_start_ns) {}
  // Also converts c's spans from ticks to ns since the run's start (what the buffer timeline reads next).
  void write(StepCapture& c);
  bool wants_flush() const { return writer_.bytes_buffered() >= trace::TraceWriter::kFlushBytes; }
  void flush() { writer_.flush(); }
  const trace::TraceWriter& file() const { return writer_; }

 private:
  trace::TraceWriter writer_;
  uint64_t t0_;
  std::unordered_map<const GraphSnapshot*, std::vector<uint32_t>> ids_;  // interned names, by graph
  trace::OpRecord record_;                                               // reused between ops
  std::vector<trace::Share> shares_;
  trace::IoRecord io_;
};

}  // namespace tt
