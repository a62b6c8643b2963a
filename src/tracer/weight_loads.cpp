#include "tracer/weight_loads.h"

namespace tt {

void WeightStepTotals::write(JsonLine& j) const {
  j.field("weight_hits", hits)
      .field("weight_misses", misses)
      .field("weight_bytes_read", bytes_read)
      .field("weight_stall_ns", stall_ns)
      .field("weight_prefetches", prefetches)
      .field("weight_prefetch_hits", prefetch_hits);
}

WeightStepTotals WeightLoadRecorder::take_step() {
  store_.take_accesses(accesses_);
  WeightStepTotals totals;
  for (const WeightAccess& a : accesses_) {
    const uint64_t bytes = store_.units()[a.unit].bytes;
    if (a.prefetch) {
      ++totals.prefetches;
      totals.bytes_read += bytes;
      continue;
    }
    totals.stall_ns += a.wait_ns;
    if (a.hit) {
      ++totals.hits;
      totals.prefetch_hits += a.prefetch_hit;
    } else {
      ++totals.misses;
      totals.bytes_read += bytes;
    }
  }
  return totals;
}

void WeightLoadRecorder::write(trace::TraceWriter& writer, uint32_t step) const {
  trace::WeightLoadRecord r;
  r.step = step;
  for (const WeightAccess& a : accesses_) {
    const WeightStore::Unit& u = store_.units()[a.unit];
    r.node = a.node;
    r.tensor = u.tensor->name;
    r.expert = u.expert;
    r.offset = u.file_offset;
    r.bytes = u.bytes;
    r.start_ns = a.start_ns - t0_;
    r.end_ns = a.end_ns - t0_;
    r.wait_ns = a.wait_ns;
    r.hit = a.hit;
    r.prefetch = a.prefetch;
    writer.weight_load(r, writer.intern(r.tensor));
  }
}

}  // namespace tt
