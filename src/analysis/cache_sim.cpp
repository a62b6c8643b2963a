#include "analysis/cache_sim.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <tuple>
#include <unordered_map>

#include "core/error.h"

namespace tt::analysis {

CacheResult simulate_cache(const std::vector<Access>& stream, uint64_t capacity, CachePolicy policy) {
  CacheResult r;
  r.policy = policy;
  r.capacity = capacity;
  uint32_t n_phases = 1;
  if (policy == CachePolicy::LEAST_STALE)
    for (const Access& a : stream) n_phases = std::max(n_phases, a.phase + 1);
  cache::PolicyCache c(policy, capacity, n_phases,
                       policy == CachePolicy::OPT ? next_use(stream) : std::vector<size_t>{});
  for (const Access& a : stream) {
    const cache::Outcome& o = c.access(a);
    r.evictions += o.evicted.size();
    if (a.prefetch) {
      if (o.loaded) ++r.prefetches, r.prefetch_bytes += a.bytes;
      continue;
    }
    ++r.accesses;
    r.bytes_accessed += a.bytes;
    if (o.hit) {
      ++r.hits;
      if (o.useful) ++r.useful_prefetches;
      continue;
    }
    ++r.misses;
    r.bytes_missed += a.bytes;
    if (o.first) ++r.cold_misses;
  }
  return r;
}

std::vector<uint64_t> reuse_distances(const std::vector<Access>& stream) {
  const size_t n = stream.size();
  std::vector<int64_t> tree(n + 1, 0);  // Fenwick tree over access times: size at each key's last access
  auto add = [&](size_t i, int64_t v) {
    for (++i; i <= n; i += i & (~i + 1)) tree[i] += v;
  };
  auto prefix = [&](size_t i) {  // sum over [0, i)
    int64_t s = 0;
    for (; i > 0; i -= i & (~i + 1)) s += tree[i];
    return s;
  };
  std::vector<uint64_t> dist(n, UINT64_MAX);
  std::unordered_map<uint64_t, std::pair<size_t, uint64_t>> last;  // key -> (time, bytes)
  last.reserve(n);
  for (size_t t = 0; t < n; ++t) {
    auto it = last.find(stream[t].key);
    if (it != last.end()) {
      const auto [prev, bytes] = it->second;
      dist[t] = static_cast<uint64_t>(prefix(t) - prefix(prev + 1));
      add(prev, -static_cast<int64_t>(bytes));
      it->second = {t, stream[t].bytes};
    } else {
      last.emplace(stream[t].key, std::make_pair(t, stream[t].bytes));
    }
    add(t, static_cast<int64_t>(stream[t].bytes));
  }
  return dist;
}

std::string format_bytes(uint64_t b) {
  if (b < 1024) return fmt::format("{} B", b);
  if (b < 1024ull * 1024) return fmt::format("{:.1f} KiB", b / 1024.0);
  if (b < 1024ull * 1024 * 1024) return fmt::format("{:.1f} MiB", b / 1048576.0);
  return fmt::format("{:.2f} GiB", b / 1073741824.0);
}

}  // namespace tt::analysis
