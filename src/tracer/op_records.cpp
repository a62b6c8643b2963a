#include "tracer/op_records.h"

#include <algorithm>

#include "tracer/io_probe.h"

namespace tt {
namespace {

// ns = ns_before + (ticks - ticks_before) * ns / ticks over the step, clamped to the step (counters read on other
// cores may differ by a few ticks); {0, 0} (no share) stays.
void spans_to_ns(StepCapture& c) {
  const uint64_t ticks = std::max<uint64_t>(1, c.ticks_after - c.ticks_before), ns = c.ns_after - c.ns_before;
  const unsigned __int128 scale = (static_cast<unsigned __int128>(ns) << 32) / ticks;
  auto to_ns = [&](uint64_t t) {
    const uint64_t d = std::clamp(t, c.ticks_before, c.ticks_after) - c.ticks_before;
    return c.ns_before + static_cast<uint64_t>((d * scale) >> 32);
  };
  for (WorkerSpan& s : c.spans) {
    if (s.start == 0 && s.end == 0) continue;
    // A share ends after it starts: its two reads are on one thread (a migration between cores whose counters
    // differ could read them in the other order).
    s = {to_ns(s.start), to_ns(std::max(s.start, s.end))};
  }
}

}  // namespace

void OpRecordWriter::write(StepCapture& c) {
  const GraphSnapshot& g = *c.graph;
  std::vector<uint32_t>& ids = ids_[&g];
  if (ids.empty())
    for (const std::string& name : g.names) ids.push_back(writer_.intern(name));
  spans_to_ns(c);
  trace::StepMarker begin = c.marker;
  begin.end_ns = 0, begin.token = -1, begin.probability = 0, begin.ended = false;
  writer_.step_begin(begin);
  const size_t n = g.records.size();
  size_t next_variable = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool changes = next_variable < g.variable.size() && g.variable[next_variable] == i;
    const trace::OpRecord& placed = changes ? c.placements[next_variable++] : g.records[i];
    trace::OpRecord& r = record_;
    r = g.records[i];
    if (changes) r.out = placed.out, r.write = placed.write, r.inputs = placed.inputs;
    r.step = c.marker.step;
    r.phase = c.marker.phase;
    r.pos_begin = c.marker.pos_begin;
    r.pos_end = c.marker.pos_end;
    r.has_stats = !c.stats.empty() && !op_is_view(r.op);
    if (r.has_stats) r.stats = c.stats[i];
    shares_.clear();
    for (int t = 0; t < c.n_threads; ++t) {
      const WorkerSpan& s = c.spans[static_cast<size_t>(t) * n + i];
      if (s.start == 0 && s.end == 0) continue;
      shares_.push_back({static_cast<uint16_t>(t), s.start - t0_, s.end - t0_});
    }
    writer_.op(r, &ids[g.name_at[i]], shares_);
    if (!c.io_ranges.empty() && !c.io_ranges[i].empty()) {  // --io-trace: each op's IO record follows it
      io_.step = c.marker.step;
      io_.node = static_cast<uint32_t>(i);
      io_.page_bytes = static_cast<uint32_t>(page_bytes());
      io_.ranges = c.io_ranges[i];
      io_.workers.clear();
      for (const trace::Share& s : shares_) io_.workers.push_back(c.io_workers[s.thread * n + i]);
      writer_.io(io_);
    }
  }
  writer_.step_end(c.marker);
}

}  // namespace tt
