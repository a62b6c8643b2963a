// What the tracer's parts share about writing their files: when to write what they have buffered, and buffers
// whose pages are touched before the steps.
#pragma once

#include <cstddef>
#include <cstdint>

#include "trace/trace_file.h"

namespace tt {

// A part writes its buffered bytes when they pass kFlushBytes, and at least every kIntervalNs (what a killed run can
// lose): a write call costs tens of microseconds on a VM whatever its size, so small buffers are not written every
// few steps.
class FlushSchedule {
 public:
  static constexpr size_t kFlushBytes = trace::TraceWriter::kFlushBytes;
  static constexpr uint64_t kIntervalNs = 500'000'000;
  bool due(uint64_t now_ns, size_t buffered_bytes) {
    if (buffered_bytes < kFlushBytes && now_ns - last_ns_ < kIntervalNs) return false;
    last_ns_ = now_ns;
    return true;
  }

 private:
  uint64_t last_ns_ = 0;
};

// Capacity for n elements with every page already touched: on a VM the first touch of a fresh page costs far more
// than touching it again (docs/performance.md), so the buffers that fill during steps are faulted in at set-up and
// then reused.
template <typename Container>
void reserve_touched(Container& c, size_t n) {
  c.resize(n);
  c.clear();  // keeps the capacity
}

// Steps whose per-step entries (graph ids, buffer timeline entries) fit without growing.
constexpr size_t kStepsReserved = 4096;

}  // namespace tt
