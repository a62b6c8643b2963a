// Writing and reading trace.bin (docs/trace-format.md).
#pragma once

#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

#include "trace/format.h"
#include "trace/records.h"

namespace tt::trace {

class TraceWriter {
 public:
  explicit TraceWriter(const std::string& path);  // throws tt::Error
  ~TraceWriter();
  void step_begin(const StepMarker& m);
  void op(const OpRecord& r);
  void span(const SpanRecord& s);
  void step_end(const StepMarker& m);
  void io(const IoRecord& r);
  // Pushes buffered records to the file (called at the end of every step, so a kill loses at most one step).
  void flush();
  uint64_t bytes_written() const { return bytes_written_ + buffer_.size(); }
  uint64_t op_count() const { return op_count_; }
  uint64_t span_count() const { return span_count_; }

 private:
  uint32_t intern(const std::string& s);
  void begin_record(RecordKind kind);
  void end_record();

  std::string path_;
  std::FILE* file_ = nullptr;
  std::vector<uint8_t> buffer_;
  size_t record_start_ = 0;
  std::unordered_map<std::string, uint32_t> strings_;
  uint64_t bytes_written_ = 0, op_count_ = 0, span_count_ = 0;
};

struct TraceContents {
  uint32_t version = 0;
  std::vector<StepMarker> steps;
  std::vector<OpRecord> ops;
  std::vector<SpanRecord> spans;
  std::vector<IoRecord> io;  // version 2 with --io-trace
  bool complete = true;         // false when the file ends inside a record
  uint64_t stopped_at = 0;      // byte offset where reading stopped
  std::string stop_reason;      // why it stopped early (truncated record, ...)
};

// Reads a whole trace. A truncated tail (a run killed midway) is not an error: every complete record is returned
// and complete/stopped_at/stop_reason say where and why reading stopped. A corrupt file is an Error.
TraceContents read_trace(const std::string& path);

}  // namespace tt::trace
