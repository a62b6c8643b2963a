// In-memory form of trace records, shared by the writer (tracer) and the reader.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ops.h"
#include "gguf/ggml_type.h"

namespace tt::trace {

struct RangeRecord {
  Pool pool = Pool::MODEL_FILE;
  int32_t buffer_id = -1;
  uint64_t offset = 0;  // MODEL_FILE: absolute file offset; else offset in the buffer
  uint64_t length = 0;
  int32_t pos_begin = -1, pos_end = -1;  // KV_CACHE positions
};

struct TensorRecord {
  std::string name;
  GgmlType type = GgmlType::F32;
  int64_t ne[4] = {1, 1, 1, 1};
  Pool pool = Pool::ACTIVATION;
  int32_t buffer_id = -1;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  std::vector<RangeRecord> ranges;  // inputs: the exact bytes read
};

struct ValueStats {
  float min = 0, max = 0;
  double mean = 0;
  uint64_t nan_count = 0, inf_count = 0;
  uint64_t hash = 0;  // xxh64 of the output bytes
};

struct OpRecord {
  uint32_t step = 0;
  uint32_t node = 0;  // index in the step's graph
  Phase phase = Phase::PROMPT;
  OpKind op = OpKind::kCount;
  int16_t layer = -1;
  int32_t pos_begin = 0, pos_end = 0;
  uint16_t thread = 0;                // lowest worker that did part of it
  uint16_t n_threads = 0;             // workers that did part of it (0 for views)
  uint64_t start_ns = 0, end_ns = 0;  // relative to the run start
  std::string name;
  TensorRecord out;
  RangeRecord write;
  std::vector<TensorRecord> inputs;
  bool has_stats = false;
  ValueStats stats;
};

struct SpanRecord {
  uint32_t step = 0, node = 0;
  uint16_t thread = 0;
  uint64_t start_ns = 0, end_ns = 0;
};

// One worker's share of an op, as an OP record holds it (views: thread 0's instant, which is no SPAN).
struct Share {
  uint16_t thread = 0;
  uint64_t start_ns = 0, end_ns = 0;
};

struct StepMarker {
  uint32_t step = 0;
  Phase phase = Phase::PROMPT;
  int32_t pos_begin = 0, pos_end = 0;
  uint64_t start_ns = 0, end_ns = 0;
  int32_t token = -1;
  float probability = 0;
  bool ended = false;
};

// With `run --io-trace`: one op's model-file ranges, how many of their pages were not in the page cache just
// before the op (mincore), and per worker the major/minor faults and bytes read from storage during the op.
struct IoRange {
  uint64_t offset = 0, length = 0;  // absolute file offset
  uint32_t pages = 0, nonresident_pages = 0;
};
struct IoWorker {
  uint16_t thread = 0;
  uint64_t major_faults = 0, minor_faults = 0;
  uint64_t read_bytes = 0;  // /proc/thread-self/io read_bytes
};
struct IoRecord {
  uint32_t step = 0, node = 0;
  uint32_t page_bytes = 4096;
  uint64_t pages = 0, nonresident_pages = 0;  // sums over ranges
  std::vector<IoRange> ranges;
  std::vector<IoWorker> workers;
};

}  // namespace tt::trace
