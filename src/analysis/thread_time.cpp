#include "analysis/thread_time.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include "core/ops.h"

namespace tt::analysis {

using nlohmann::json;

namespace {

// The gaps of one thread in one step: the parts of [begin, end) that none of its spans cover.
struct ThreadStep {
  uint64_t busy_ns = 0, outside_ns = 0;
  std::vector<uint64_t> gaps;
};

using Spans = std::vector<std::pair<uint64_t, uint64_t>>;  // (start, end), sorted

ThreadStep measure_thread(const Spans& spans, uint64_t begin, uint64_t end) {
  ThreadStep s;
  uint64_t cursor = begin;  // covered up to here
  for (auto [a, b] : spans) {
    a = std::clamp(a, begin, end), b = std::clamp(b, begin, end);
    if (b <= cursor) continue;  // inside what is covered already (or outside the step)
    if (a > cursor) s.gaps.push_back(a - cursor);
    s.busy_ns += b - std::max(a, cursor);
    cursor = b;
  }
  if (end > cursor) s.gaps.push_back(end - cursor);
  for (uint64_t g : s.gaps) s.outside_ns += g;
  return s;
}

double quantile(std::vector<uint64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5));
  return static_cast<double>(v[i]);
}

}  // namespace

json thread_time(std::span<const trace::StepMarker> steps, std::span<const trace::SpanRecord> all_spans) {
  constexpr uint64_t kShortGapNs = 1000;
  // [step][thread] -> spans
  std::map<uint32_t, std::map<uint16_t, Spans>> spans;
  for (const trace::SpanRecord& s : all_spans)
    if (s.end_ns >= s.start_ns) spans[s.step][s.thread].push_back({s.start_ns, s.end_ns});
  // Threads are numbered 0 to 65535: counted in 32 bits, so thread 65535 makes 65536 (in 16 bits, 0).
  uint32_t n_threads = 0;
  for (auto& [step, threads] : spans) {
    for (auto& [thread, list] : threads) std::sort(list.begin(), list.end());
    if (!threads.empty()) n_threads = std::max<uint32_t>(n_threads, threads.rbegin()->first + 1u);
  }

  // The step after each (steps are numbered in order; a killed run may lack the last ones' markers).
  std::map<uint32_t, const trace::StepMarker*> by_step;
  for (const trace::StepMarker& m : steps) by_step[m.step] = &m;
  auto next_step = [&](uint32_t step) -> const trace::StepMarker* {
    const auto it = by_step.find(step + 1);
    return it == by_step.end() ? nullptr : it->second;
  };

  // Per phase, per step: the step's length and, per thread, its time in shares, outside them and its gaps.
  struct Acc {
    explicit Acc(uint32_t n) : busy(n), outside(n), n_gaps(n), gaps(n), short_ns(n, 0) {}
    std::vector<uint64_t> step_ns;
    std::vector<uint64_t> after_ns;                            // from an ended step's end to the next step's begin
    std::vector<std::vector<uint64_t>> busy, outside, n_gaps;  // [thread][step]
    std::vector<std::vector<uint64_t>> gaps;                   // [thread] every gap of every step
    std::vector<uint64_t> short_ns;                            // [thread] outside time in gaps < kShortGapNs
  };
  auto sum = [](const std::vector<uint64_t>& v) { return std::accumulate(v.begin(), v.end(), uint64_t{0}); };
  std::map<std::string, Acc> phases;
  for (const trace::StepMarker& m : steps) {
    const auto it = spans.find(m.step);
    if (!m.ended || m.end_ns <= m.start_ns || it == spans.end()) continue;
    Acc& a = phases.try_emplace(phase_name(m.phase), n_threads).first->second;
    a.step_ns.push_back(m.end_ns - m.start_ns);
    if (const trace::StepMarker* next = next_step(m.step); next != nullptr && next->start_ns >= m.end_ns)
      a.after_ns.push_back(next->start_ns - m.end_ns);
    for (uint32_t th = 0; th < n_threads; ++th) {
      const auto found = it->second.find(static_cast<uint16_t>(th));
      const ThreadStep s = measure_thread(found == it->second.end() ? Spans{} : found->second, m.start_ns, m.end_ns);
      a.busy[th].push_back(s.busy_ns), a.outside[th].push_back(s.outside_ns), a.n_gaps[th].push_back(s.gaps.size());
      for (uint64_t g : s.gaps) {
        if (g < kShortGapNs) a.short_ns[th] += g;
        a.gaps[th].push_back(g);
      }
    }
  }

  // Medians over steps: a run's first steps (a new graph, cold caches) can be tens of times longer.
  json out = {{"short_gap_ns", kShortGapNs}, {"phases", json::object()}};
  for (const auto& [phase, a] : phases) {
    json threads = json::array();
    for (uint32_t th = 0; th < n_threads; ++th) {
      const uint64_t outside_total = sum(a.outside[th]);
      threads.push_back(
          {{"thread", th},
           {"busy_ns_total", sum(a.busy[th])},
           {"outside_ns_total", outside_total},
           {"busy_ns_median_step", quantile(a.busy[th], 0.5)},
           {"outside_ns_median_step", quantile(a.outside[th], 0.5)},
           {"gaps_median_step", quantile(a.n_gaps[th], 0.5)},
           {"gap_median_ns", quantile(a.gaps[th], 0.5)},
           {"gap_p90_ns", quantile(a.gaps[th], 0.9)},
           {"outside_share_in_short_gaps", outside_total ? static_cast<double>(a.short_ns[th]) / outside_total : 0.0}});
    }
    out["phases"][phase] = {{"steps", a.step_ns.size()},
                            {"step_ns_total", sum(a.step_ns)},
                            {"step_ns_median", quantile(a.step_ns, 0.5)},
                            {"after_step_ns_median", quantile(a.after_ns, 0.5)},
                            {"threads", threads}};
  }
  return out;
}

}  // namespace tt::analysis
