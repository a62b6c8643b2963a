#include "analysis/weight_cache.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <unordered_map>

#include "cache/policy_cache.h"
#include "core/error.h"

namespace tt::analysis {

std::vector<cache::Access> weight_access_stream(const RunData& run, uint64_t page, uint32_t n_phases) {
  std::vector<cache::Access> stream;
  stream.reserve(run.trace.weight_loads.size());
  for (const trace::WeightLoadRecord& l : run.trace.weight_loads) {
    uint32_t phase = n_phases - 1;
    int layer = -1;
    if (l.tensor == "token_embd.weight")
      phase = 0;
    else if (std::sscanf(l.tensor.c_str(), "blk.%d.", &layer) == 1 && layer >= 0 &&
             static_cast<uint32_t>(layer) + 2 < n_phases)
      phase = static_cast<uint32_t>(layer) + 1;
    stream.push_back({l.offset, (l.bytes + page - 1) / page * page, phase, l.prefetch});
  }
  return stream;
}

std::optional<WeightCacheSection> weight_cache_section(const RunData& run, const std::optional<StorageRates>& storage) {
  if (!run.info.weight_cache) return std::nullopt;
  const RunInfo::WeightCache& w = *run.info.weight_cache;
  WeightCacheSection s;
  s.policy = w.policy;
  s.prefetch = w.prefetch;
  s.capacity = w.budget_bytes;
  const uint64_t page = w.page_bytes;
  const uint32_t n_phases = w.n_phases;
  const std::optional<cache::Policy> policy = cache::policy_from_name(s.policy);
  if (!policy) fail("{}: run.json's weight_cache.policy '{}' is not a cache policy", run.dir, w.policy);
  const std::vector<cache::Access> stream = weight_access_stream(run, page, n_phases);
  std::vector<uint64_t> group;
  std::set<uint32_t> steps;
  std::unordered_map<uint64_t, bool> prefetched;  // unit: brought in by a prefetch, not yet used
  for (const trace::WeightLoadRecord& l : run.trace.weight_loads) {
    group.push_back(static_cast<uint64_t>(l.step) << 32 | l.node);
    steps.insert(l.step);
    if (l.prefetch) {
      ++s.prefetches, s.prefetch_bytes += l.bytes, s.measured_bytes_read += l.bytes;
      prefetched[l.offset] = true;
      continue;
    }
    ++s.accesses;
    s.stall_ns += l.wait_ns;
    bool& p = prefetched[l.offset];
    if (l.hit) {
      ++s.measured_hits;
      if (p) ++s.prefetch_hits;
    } else {
      s.measured_bytes_read += l.bytes;
    }
    p = false;
  }
  s.steps = steps.size();
  cache::PolicyCache c(*policy, s.capacity, n_phases,
                       *policy == cache::Policy::OPT ? cache::next_use(stream) : std::vector<size_t>{});
  const std::vector<bool> hits = cache::replay_pinned(c, stream, group, &s.resident_after);
  for (size_t i = 0; i < hits.size(); ++i) {
    if (stream[i].prefetch) continue;
    if (hits[i])
      ++s.simulated_hits;
    else
      s.simulated_bytes_read += run.trace.weight_loads[i].bytes;
  }
  s.replay_prefetch = simulate_cache(stream, s.capacity, *policy);
  std::vector<cache::Access> demand;
  for (const cache::Access& a : stream)
    if (!a.prefetch) demand.push_back(a);
  s.replay_demand = simulate_cache(demand, s.capacity, *policy);
  s.read_bytes_per_s = w.read_bytes_per_s;
  s.storage = storage;
  if (!s.storage && w.storage)
    s.storage = StorageRates{w.storage->sequential_bytes_per_s, w.storage->random_4k_bytes_per_s, w.storage->method};
  return s;
}

StorageRates read_storage_rates(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("{}: cannot open (the output of bench --io --json)", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not JSON: {}", path, e.what());
  }
  if (!j.is_object() || !j.contains("io") || !j["io"].is_object())
    fail("{}: no \"io\" object (the output of bench --io --json)", path);
  const nlohmann::json& io = j["io"];
  StorageRates r;
  try {
    r.sequential = io.at("sequential_bytes_per_s").get<double>();
    r.random_4k = io.at("random_4k_bytes_per_s").get<double>();
    r.method = io.value("method", "");
  } catch (const nlohmann::json::exception&) {
    fail("{}: \"io\" needs numbers sequential_bytes_per_s and random_4k_bytes_per_s", path);
  }
  if (!(r.sequential > 0) || !(r.random_4k > 0)) fail("{}: the read rates must be positive", path);
  return r;
}

namespace {

nlohmann::json replay_json(const CacheResult& r) {
  return {{"hits", r.hits},
          {"hit_rate", r.accesses ? static_cast<double>(r.hits) / r.accesses : 0.0},
          {"bytes_read", r.bytes_missed + r.prefetch_bytes},
          {"prefetches", r.prefetches},
          {"prefetch_hits", r.useful_prefetches}};
}

}  // namespace

nlohmann::json weight_cache_json(const WeightCacheSection& s) {
  nlohmann::json j = {{"policy", s.policy},
                      {"prefetch", s.prefetch},
                      {"capacity_bytes", s.capacity},
                      {"accesses", s.accesses},
                      {"steps", s.steps},
                      {"measured",
                       {{"hits", s.measured_hits},
                        {"hit_rate", s.hit_rate(s.measured_hits)},
                        {"bytes_read", s.measured_bytes_read},
                        {"stall_ns", s.stall_ns},
                        {"stall_ns_per_step", s.steps ? s.stall_ns / s.steps : 0},
                        {"prefetches", s.prefetches},
                        {"prefetch_bytes", s.prefetch_bytes},
                        {"prefetch_hits", s.prefetch_hits},
                        {"read_bytes_per_s", s.read_bytes_per_s}}},
                      {"simulated",
                       {{"hits", s.simulated_hits},
                        {"hit_rate", s.hit_rate(s.simulated_hits)},
                        {"bytes_read", s.simulated_bytes_read}}},
                      {"replay_prefetch", replay_json(s.replay_prefetch)},
                      {"replay_no_prefetch", replay_json(s.replay_demand)},
                      {"agree", s.measured_hits == s.simulated_hits}};
  if (s.storage)
    j["storage"] = {{"sequential_bytes_per_s", s.storage->sequential},
                    {"random_4k_bytes_per_s", s.storage->random_4k},
                    {"method", s.storage->method}};
  return j;
}

std::string weight_cache_text(const WeightCacheSection& s) {
  const bool prefetch = s.prefetches > 0 || s.prefetch != "none";
  std::string o =
      fmt::format("\n== Weight cache ({}, {:.1f} MiB, {} accesses{}): measured vs replayed ==\n", s.policy,
                  s.capacity / 1048576.0, s.accesses, prefetch ? fmt::format(", prefetch {}", s.prefetch) : "");
  o += fmt::format("  {:<20} {:>9} {:>9} {:>14}\n", "", "hits", "hit rate", "read");
  o += fmt::format("  {:<20} {:>9} {:>8.2f}% {:>10.1f} MiB  stall {:.2f} ms ({:.2f} ms/step), {:.1f} MB/s\n",
                   "measured", s.measured_hits, 100 * s.hit_rate(s.measured_hits), s.measured_bytes_read / 1048576.0,
                   s.stall_ns / 1e6, s.steps ? s.stall_ns / 1e6 / static_cast<double>(s.steps) : 0.0,
                   s.read_bytes_per_s / 1e6);
  if (prefetch)
    o += fmt::format(
        "  {:<20} {} reads, {:.1f} MiB; {} prefetch hits (a demand access found the unit a prefetch read)\n",
        "prefetch", s.prefetches, s.prefetch_bytes / 1048576.0, s.prefetch_hits);
  o += fmt::format("  {:<20} {:>9} {:>8.2f}% {:>10.1f} MiB\n", "simulated (pinned)", s.simulated_hits,
                   100 * s.hit_rate(s.simulated_hits), s.simulated_bytes_read / 1048576.0);
  auto replay = [&](const char* name, const CacheResult& r) {
    o += fmt::format("  {:<20} {:>9} {:>8.2f}% {:>10.1f} MiB", name, r.hits,
                     r.accesses ? 100.0 * r.hits / r.accesses : 0.0, (r.bytes_missed + r.prefetch_bytes) / 1048576.0);
    if (r.prefetches) o += fmt::format("  {} prefetch hits", r.useful_prefetches);
    // Without prefetch every miss stalls: its bytes at the run's read rate.
    if (!r.prefetches && s.read_bytes_per_s > 0 && s.steps)
      o += fmt::format("  stall ~{:.2f} ms/step at the run's read rate",
                       r.bytes_missed / s.read_bytes_per_s * 1e3 / static_cast<double>(s.steps));
    o += "\n";
  };
  if (prefetch) replay("replay, prefetch", s.replay_prefetch);
  replay("replay, no prefetch", s.replay_demand);
  if (s.storage)
    o += fmt::format("  storage ({}): sequential {:.1f} MB/s, 4 KiB random {:.1f} MB/s; this run read at {:.1f} MB/s\n",
                     s.storage->method, s.storage->sequential / 1e6, s.storage->random_4k / 1e6,
                     s.read_bytes_per_s / 1e6);
  if (s.measured_hits != s.simulated_hits) {
    if (prefetch)
      o += "  (with prefetch the replay differs from the run where reads in flight held their room)\n";
    else
      o += "  DISAGREE: the run's cache and its replay differ (a bug)\n";
  }
  return o;
}

}  // namespace tt::analysis
