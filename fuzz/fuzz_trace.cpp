// libFuzzer target for the trace.bin reader (dump, analyze, export and serve all start with it): any byte string
// must parse, stop early at a truncated record, or give a tt::Error; never crash, hang, read out of bounds or
// allocate without bound. Most inputs are resealed first (trace_seal.h). What parses is pushed through the names
// consumers print for each record.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/ggml_type.h"
#include "graph/graph.h"
#include "trace/trace_file.h"
#include "trace_seal.h"

namespace {

size_t names_of(const tt::trace::TensorRecord& t) {
  size_t n = t.name.size() + tt::type_name(t.type).size() + std::string(tt::pool_name(t.pool)).size();
  for (const tt::trace::RangeRecord& r : t.ranges) n += std::string(tt::pool_name(r.pool)).size();
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  seal_most(bytes);
  try {
    const tt::trace::TraceContents t = tt::trace::parse_trace(bytes, "fuzz-input");
    size_t total = t.stop_reason.size();
    for (const tt::trace::StepMarker& m : t.steps) total += std::string(tt::phase_name(m.phase)).size();
    for (const tt::trace::OpRecord& o : t.ops) {
      total += std::string(tt::op_name(o.op)).size() + std::string(tt::phase_name(o.phase)).size() + names_of(o.out);
      total += std::string(tt::pool_name(o.write.pool)).size();
      for (const tt::trace::TensorRecord& in : o.inputs) total += names_of(in);
    }
    for (const tt::trace::IoRecord& io : t.io) total += io.ranges.size() + io.workers.size();
    volatile size_t sink = total;
    (void)sink;
  } catch (const tt::Error&) {
    // rejected with a message: the expected outcome for most inputs
  }
  return 0;
}
