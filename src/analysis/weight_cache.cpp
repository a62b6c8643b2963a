#include "analysis/weight_cache.h"

#include <fmt/format.h>

#include <map>

#include "cache/policy_cache.h"
#include "core/error.h"

namespace tt::analysis {

std::optional<WeightCacheSection> weight_cache_section(const RunData& run) {
  if (!run.run.is_object() || !run.run.contains("weight_cache") || run.run["weight_cache"].is_null())
    return std::nullopt;
  const nlohmann::json& w = run.run["weight_cache"];
  WeightCacheSection s;
  s.policy = w.value("policy", "");
  s.capacity = w.value("budget_bytes", uint64_t{0});
  const uint64_t page = w.value("page_bytes", uint64_t{4096});
  const uint32_t n_phases = w.value("n_phases", 1u);
  const std::optional<cache::Policy> policy = cache::policy_from_name(s.policy);
  if (!policy || page == 0 || n_phases < 2) fail("{}: run.json's weight_cache is malformed", run.dir);
  // Units as the store keyed and phased them: 0 the embedding, 1 + layer, n_phases - 1 the rest.
  std::map<std::pair<std::string, int32_t>, uint64_t> keys;
  std::vector<cache::Access> stream;
  std::vector<uint64_t> group;
  for (const trace::WeightLoadRecord& l : run.trace.weight_loads) {
    const uint64_t key = keys.emplace(std::make_pair(l.tensor, l.expert), keys.size()).first->second;
    uint32_t phase = n_phases - 1;
    int layer = -1;
    if (l.tensor == "token_embd.weight")
      phase = 0;
    else if (std::sscanf(l.tensor.c_str(), "blk.%d.", &layer) == 1 && layer >= 0 &&
             static_cast<uint32_t>(layer) + 2 < n_phases)
      phase = static_cast<uint32_t>(layer) + 1;
    stream.push_back({key, (l.bytes + page - 1) / page * page, phase, l.prefetch});
    group.push_back(static_cast<uint64_t>(l.step) << 32 | l.node);
    ++s.accesses;
    if (l.hit)
      ++s.measured_hits;
    else
      s.measured_bytes_read += l.bytes, s.stall_ns += l.wait_ns;
  }
  cache::PolicyCache c(*policy, s.capacity, n_phases,
                       *policy == cache::Policy::OPT ? cache::next_use(stream) : std::vector<size_t>{});
  const std::vector<bool> hits = cache::replay_pinned(c, stream, group, &s.resident_after);
  for (size_t i = 0; i < hits.size(); ++i) {
    if (hits[i])
      ++s.simulated_hits;
    else
      s.simulated_bytes_read += run.trace.weight_loads[i].bytes;
  }
  s.read_bytes_per_s = w.value("read_bytes_per_s", 0.0);
  return s;
}

nlohmann::json weight_cache_json(const WeightCacheSection& s) {
  return {{"policy", s.policy},
          {"capacity_bytes", s.capacity},
          {"accesses", s.accesses},
          {"measured",
           {{"hits", s.measured_hits},
            {"hit_rate", s.hit_rate(s.measured_hits)},
            {"bytes_read", s.measured_bytes_read},
            {"stall_ns", s.stall_ns},
            {"read_bytes_per_s", s.read_bytes_per_s}}},
          {"simulated",
           {{"hits", s.simulated_hits},
            {"hit_rate", s.hit_rate(s.simulated_hits)},
            {"bytes_read", s.simulated_bytes_read}}},
          {"agree", s.measured_hits == s.simulated_hits}};
}

std::string weight_cache_text(const WeightCacheSection& s) {
  std::string o = fmt::format("\n== Weight cache ({}, {:.1f} MiB, {} accesses): measured vs replayed ==\n", s.policy,
                              s.capacity / 1048576.0, s.accesses);
  o += fmt::format("  {:<10} {:>9} {:>9} {:>14}\n", "", "hits", "hit rate", "read");
  o += fmt::format("  {:<10} {:>9} {:>8.2f}% {:>10.1f} MiB  stall {:.2f} ms, {:.1f} MB/s\n", "measured",
                   s.measured_hits, 100 * s.hit_rate(s.measured_hits), s.measured_bytes_read / 1048576.0,
                   s.stall_ns / 1e6, s.read_bytes_per_s / 1e6);
  o += fmt::format("  {:<10} {:>9} {:>8.2f}% {:>10.1f} MiB\n", "simulated", s.simulated_hits,
                   100 * s.hit_rate(s.simulated_hits), s.simulated_bytes_read / 1048576.0);
  if (s.measured_hits != s.simulated_hits) o += "  DISAGREE: the run's cache and its replay differ (a bug)\n";
  return o;
}

}  // namespace tt::analysis
