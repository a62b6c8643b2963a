#include "tracer/buffer_timeline.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/forward.h"

namespace tt {

BufferTimeline::BufferTimeline(RunDirWriter& dir, trace::TraceWriter& strings, uint64_t run_start_ns)
    : dir_(dir), strings_(strings), t0_(run_start_ns) {
  node_times_file_ = std::make_unique<std::fstream>(dir.path(kNodeTimesFile),
                                                    std::ios::in | std::ios::out | std::ios::trunc | std::ios::binary);
  if (!*node_times_file_) fail("cannot create '{}'", dir.path(kNodeTimesFile));
  // Flushed before they pass kFlushBytes, so they never grow inside a step.
  reserve_touched(node_times_, 2 * FlushSchedule::kFlushBytes / sizeof(WorkerSpan));
  reserve_touched(steps_, kStepsReserved);
}

void BufferTimeline::record_static_buffer(const std::string& name, Pool pool, int buffer_id, uint64_t bytes) {
  events_.push_back({0, 0, 'a', pool, buffer_id, 0, bytes, strings_.intern(name), false});
  static_bytes_ += bytes;
}

void BufferTimeline::on_graph_ready(const Graph& g, uint32_t step) {
  for (const BufferInfo& b : g.buffers) {
    if (b.id != kArenaBuffer && b.id != kScratchBuffer) continue;
    uint64_t& known = b.id == kArenaBuffer ? arena_bytes_ : scratch_bytes_;
    if (b.size > known) {
      events_.push_back(
          {now_ns() - t0_, step, 'a', b.pool, b.id, 0, b.size, strings_.intern(b.name + " (grow)"), false});
      known = b.size;
    }
  }
}

void BufferTimeline::on_step_end(uint32_t step, const GraphEntry& graph, uint64_t step_start_ns,
                                 std::span<const WorkerSpan> node_ns, uint64_t now_ns) {
  // The events themselves are the graph's; a step keeps only the run thread's node times, expanded by finish().
  steps_.push_back({step, &graph, node_times_written_ + node_times_.size(), step_start_ns, events_.size(), arena_bytes_,
                    scratch_bytes_, static_bytes_});
  node_times_.insert(node_times_.end(), node_ns.begin(), node_ns.end());
  if (flush_.due(now_ns, node_times_.size() * sizeof(WorkerSpan))) flush_node_times();
}

void BufferTimeline::flush_node_times() {
  node_times_file_->write(reinterpret_cast<const char*>(node_times_.data()),
                          static_cast<std::streamsize>(node_times_.size() * sizeof(WorkerSpan)));
  if (!*node_times_file_) fail("error writing '{}'", dir_.path(kNodeTimesFile));
  node_times_written_ += node_times_.size();
  node_times_.clear();
}

size_t BufferTimeline::finish() {
  // The node times of every step, back from the scratch file (which then goes).
  flush_node_times();
  node_times_.resize(node_times_written_);
  node_times_file_->seekg(0);
  node_times_file_->read(reinterpret_cast<char*>(node_times_.data()),
                         static_cast<std::streamsize>(node_times_.size() * sizeof(WorkerSpan)));
  if (!*node_times_file_) fail("error reading '{}'", dir_.path(kNodeTimesFile));
  node_times_file_.reset();
  std::filesystem::remove(dir_.path(kNodeTimesFile));

  // Explicit events (static buffers, growth) in their place before each step's arena events.
  nlohmann::json events = nlohmann::json::array(), step_peaks = nlohmann::json::array();
  auto add = [&](const Event& e) {
    events.push_back({e.t_ns, e.step, std::string(1, e.kind), pool_name(e.pool), e.buffer_id, e.offset, e.bytes,
                      strings_.string_of(e.tensor), e.reuse});
  };
  size_t next_explicit = 0;
  uint64_t peak = 0;
  for (const Step& sb : steps_) {
    for (; next_explicit < sb.explicit_end; ++next_explicit) add(events_[next_explicit]);
    const GraphEntry& g = *sb.graph;
    // Allocations when their node starts, frees when it ends.
    for (const GraphEntry::Event& e : g.events) {
      const WorkerSpan& span = node_times_[sb.times_at + e.node];
      const uint64_t start = span.start ? span.start - t0_ : sb.step_start;
      const uint64_t t = e.alloc ? start : span.end ? span.end - t0_ : start;
      add({t, sb.step, e.alloc ? 'a' : 'f', Pool::ACTIVATION, kArenaBuffer, e.offset, e.bytes, e.tensor, e.reuse});
    }
    const uint64_t total = g.activation_peak + sb.scratch_bytes + sb.static_bytes;
    peak = std::max(peak, total);
    step_peaks.push_back({{"step", sb.step},
                          {"activation_peak_bytes", g.activation_peak},
                          {"activation_peak_node", g.events.empty() ? "" : strings_.string_of(g.activation_peak_node)},
                          {"arena_bytes", sb.arena_bytes},
                          {"scratch_bytes", sb.scratch_bytes},
                          {"static_bytes", sb.static_bytes},
                          {"total_peak_bytes", total}});
  }
  for (; next_explicit < events_.size(); ++next_explicit) add(events_[next_explicit]);
  dir_.write_json("buffers.json",
                  {{"format", "tensortrace.buffers"},
                   {"version", 1},
                   {"columns", {"t_ns", "step", "kind", "pool", "buffer_id", "offset", "bytes", "tensor", "reuse"}},
                   {"events", events},
                   {"steps", step_peaks},
                   {"peak_bytes", peak}},
                  -1);
  return events.size();
}

}  // namespace tt
