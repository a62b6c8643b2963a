#include "tracer/buffer_timeline.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/forward.h"

namespace tt {

BufferTimeline::BufferTimeline(RunDirWriter& dir, uint64_t run_start_ns) : dir_(dir), t0_(run_start_ns) {
  file_ = std::make_unique<std::fstream>(dir.path(kNodeTimesFile),
                                         std::ios::in | std::ios::out | std::ios::trunc | std::ios::binary);
  if (!*file_) fail("cannot create '{}'", dir.path(kNodeTimesFile));
}

void BufferTimeline::write(const StepCapture& c) {
  events_.insert(events_.end(), c.buffer_events.begin(), c.buffer_events.end());
  steps_.push_back({c.marker.step, c.graph, node_times_written_ + node_times_.size(), c.marker.start_ns, events_.size(),
                    c.arena_bytes, c.scratch_bytes, c.static_bytes});
  const size_t n = c.graph->records.size();  // thread 0's spans come first
  node_times_.insert(node_times_.end(), c.spans.begin(), c.spans.begin() + static_cast<ptrdiff_t>(n));
}

void BufferTimeline::flush() {
  file_->write(reinterpret_cast<const char*>(node_times_.data()),
               static_cast<std::streamsize>(node_times_.size() * sizeof(WorkerSpan)));
  if (!*file_) fail("error writing '{}'", dir_.path(kNodeTimesFile));
  node_times_written_ += node_times_.size();
  node_times_.clear();
}

size_t BufferTimeline::finish() {
  flush();
  std::vector<WorkerSpan> times(node_times_written_);
  file_->seekg(0);
  file_->read(reinterpret_cast<char*>(times.data()), static_cast<std::streamsize>(times.size() * sizeof(WorkerSpan)));
  if (!*file_) fail("error reading '{}'", dir_.path(kNodeTimesFile));
  file_.reset();
  std::filesystem::remove(dir_.path(kNodeTimesFile));

  // Explicit events (static buffers, growth) in their place before each step's arena events.
  nlohmann::json events = nlohmann::json::array(), step_peaks = nlohmann::json::array();
  auto add = [&](uint64_t t, uint32_t step, bool alloc, Pool pool, int32_t buffer, uint64_t offset, uint64_t bytes,
                 const std::string& tensor, bool reuse) {
    events.push_back({t, step, alloc ? "a" : "f", pool_name(pool), buffer, offset, bytes, tensor, reuse});
  };
  auto add_explicit = [&](const ExplicitBufferEvent& e) {
    add(e.t_ns, e.step, true, e.pool, e.buffer_id, 0, e.bytes, e.name, false);
  };
  size_t next_explicit = 0;
  uint64_t peak = 0;
  for (const StepBuffers& sb : steps_) {
    for (; next_explicit < sb.explicit_end; ++next_explicit) add_explicit(events_[next_explicit]);
    const GraphSnapshot& g = *sb.graph;
    for (const GraphSnapshot::Event& e : g.events) {
      const WorkerSpan& span = times[sb.times_at + e.node];
      const uint64_t start = span.start ? span.start - t0_ : sb.step_start;
      const uint64_t t = e.alloc ? start : span.end ? span.end - t0_ : start;
      add(t, sb.step, e.alloc, Pool::ACTIVATION, kArenaBuffer, e.offset, e.bytes, e.tensor, e.reuse);
    }
    const uint64_t total = g.activation_peak + sb.scratch_bytes + sb.static_bytes;
    peak = std::max(peak, total);
    step_peaks.push_back({{"step", sb.step},
                          {"activation_peak_bytes", g.activation_peak},
                          {"activation_peak_node", g.activation_peak_tensor},
                          {"arena_bytes", sb.arena_bytes},
                          {"scratch_bytes", sb.scratch_bytes},
                          {"static_bytes", sb.static_bytes},
                          {"total_peak_bytes", total}});
  }
  for (; next_explicit < events_.size(); ++next_explicit) add_explicit(events_[next_explicit]);
  const size_t n_events = events.size();
  dir_.write_json("buffers.json",
                  {{"format", "tensortrace.buffers"},
                   {"version", 1},
                   {"columns", {"t_ns", "step", "kind", "pool", "buffer_id", "offset", "bytes", "tensor", "reuse"}},
                   {"events", std::move(events)},
                   {"steps", std::move(step_peaks)},
                   {"peak_bytes", peak}},
                  -1);
  return n_events;
}

}  // namespace tt
