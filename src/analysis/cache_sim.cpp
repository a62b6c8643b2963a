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

const char* policy_name(CachePolicy p) {
  switch (p) {
    case CachePolicy::LRU:
      return "lru";
    case CachePolicy::LFU:
      return "lfu";
    case CachePolicy::FIFO:
      return "fifo";
    case CachePolicy::LRU2:
      return "lru-2";
    case CachePolicy::LEAST_STALE:
      return "least-stale";
    case CachePolicy::OPT:
      return "opt";
  }
  return "?";
}

std::optional<CachePolicy> policy_from_name(const std::string& name) {
  std::string n;
  for (char c : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n == "lru") return CachePolicy::LRU;
  if (n == "lfu") return CachePolicy::LFU;
  if (n == "fifo") return CachePolicy::FIFO;
  if (n == "lru-2" || n == "lru2" || n == "lru-k") return CachePolicy::LRU2;
  if (n == "least-stale") return CachePolicy::LEAST_STALE;
  if (n == "opt" || n == "belady" || n == "min") return CachePolicy::OPT;
  return std::nullopt;
}

std::vector<size_t> next_use(const std::vector<Access>& stream) {
  std::vector<size_t> next(stream.size(), stream.size());
  std::unordered_map<uint64_t, size_t> later;
  later.reserve(stream.size());
  for (size_t i = stream.size(); i-- > 0;) {
    auto [it, inserted] = later.try_emplace(stream[i].key, i);
    if (!inserted) {
      next[i] = it->second;
      it->second = i;
    }
  }
  return next;
}

CacheResult simulate_cache(const std::vector<Access>& stream, uint64_t capacity, CachePolicy policy) {
  CacheResult r;
  r.policy = policy;
  r.capacity = capacity;
  std::vector<size_t> next;
  if (policy == CachePolicy::OPT) next = next_use(stream);

  // Eviction order: the smallest (p1, p2) is evicted first; LEAST_STALE keeps one such order per phase (LRU).
  using Prio = std::tuple<uint64_t, uint64_t, uint64_t>;  // p1, p2, key
  struct Entry {
    uint64_t bytes = 0, inserted = 0, last = 0, count = 0, next = 0;
    uint64_t before_last = 0;  // 1 + time of the use before `last`, 0 when none (LRU-2)
    uint64_t pass = 0;         // the pass of `last` (LEAST_STALE)
    uint32_t phase = 0;
  };
  auto prio = [&](uint64_t key, const Entry& e) -> Prio {
    switch (policy) {
      case CachePolicy::LRU:
        return {e.last, 0, key};
      case CachePolicy::LEAST_STALE:
        return {e.pass, e.last, key};
      case CachePolicy::FIFO:
        return {e.inserted, 0, key};
      case CachePolicy::LFU:
        return {e.count, e.last, key};
      case CachePolicy::LRU2:
        return {e.before_last, e.last, key};
      case CachePolicy::OPT:
        return {UINT64_MAX - e.next, e.last, key};
    }
    return {};
  };
  uint32_t n_phases = 1;
  if (policy == CachePolicy::LEAST_STALE)
    for (const Access& a : stream) n_phases = std::max(n_phases, a.phase + 1);
  std::unordered_map<uint64_t, Entry> resident;
  std::unordered_map<uint64_t, uint64_t> last_use;  // every key seen: 1 + time of its latest use
  std::vector<std::set<Prio>> orders(n_phases);
  auto order_of = [&](const Entry& e) -> std::set<Prio>& {
    return orders[policy == CachePolicy::LEAST_STALE ? e.phase : 0];
  };
  // LEAST_STALE's victim for an access of `phase`: the object last used in the oldest pass; among those of one pass,
  // the one of the phase passed most recently (this phase first), whose next use is furthest under the cycle; then the
  // least recently used. Each phase's order gives its candidate; the phases are compared here.
  uint64_t pass = 0;  // passes begun before the current one (a pass: phases not decreasing)
  auto stalest = [&](uint32_t phase) -> uint64_t {
    std::tuple<uint64_t, uint32_t, uint64_t, uint64_t> best{UINT64_MAX, 0, 0, 0};  // pass, back, last, key
    for (uint32_t back = 0; back < n_phases; ++back) {
      const std::set<Prio>& o = orders[(phase + n_phases - back) % n_phases];
      if (o.empty()) continue;
      const auto& [last_pass, last, key] = *o.begin();
      best = std::min(best, {last_pass, back, last, key});
    }
    return std::get<3>(best);
  };
  uint64_t used = 0;

  for (size_t t = 0; t < stream.size(); ++t) {
    const Access& a = stream[t];
    if (t > 0 && a.phase < stream[t - 1].phase) ++pass;
    ++r.accesses;
    r.bytes_accessed += a.bytes;
    uint64_t& seen = last_use[a.key];
    const uint64_t previous = seen;
    seen = t + 1;
    auto it = resident.find(a.key);
    if (it != resident.end()) {
      ++r.hits;
      Entry& e = it->second;
      order_of(e).erase(prio(a.key, e));
      e.before_last = e.last + 1;
      e.last = t;
      e.pass = pass;
      ++e.count;
      if (policy == CachePolicy::OPT) e.next = next[t];
      order_of(e).insert(prio(a.key, e));
      continue;
    }
    ++r.misses;
    r.bytes_missed += a.bytes;
    if (previous == 0) ++r.cold_misses;
    if (a.bytes > capacity) continue;  // bypass: never fits
    while (used + a.bytes > capacity) {
      const uint64_t key = policy == CachePolicy::LEAST_STALE ? stalest(a.phase) : std::get<2>(*orders[0].begin());
      auto v = resident.find(key);
      order_of(v->second).erase(prio(key, v->second));
      used -= v->second.bytes;
      resident.erase(v);
      ++r.evictions;
    }
    Entry e;
    e.bytes = a.bytes;
    e.inserted = e.last = t;
    e.pass = pass;
    e.before_last = previous;
    e.count = 1;
    e.next = policy == CachePolicy::OPT ? next[t] : 0;
    e.phase = policy == CachePolicy::LEAST_STALE ? a.phase : 0;
    resident.emplace(a.key, e);
    order_of(e).insert(prio(a.key, e));
    used += a.bytes;
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

uint64_t parse_size(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) fail("'{}' is not a size (expected e.g. 4096, 256K, 1M, 2G)", text);
  double v;
  try {
    v = std::stod(text.substr(0, i));
  } catch (...) {
    fail("'{}' is not a size (expected e.g. 4096, 256K, 1M, 2G)", text);
  }
  std::string unit;
  for (char c : text.substr(i)) unit += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mult = 1;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB")
    mult = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB")
    mult = 1024.0 * 1024 * 1024;
  else
    fail("'{}': unknown size unit '{}' (use K, M or G)", text, text.substr(i));
  if (!(v * mult < 0x1p63)) fail("'{}' is too large (at most 2^63 bytes)", text);  // llround's range
  return static_cast<uint64_t>(std::llround(v * mult));
}

std::string format_bytes(uint64_t b) {
  if (b < 1024) return fmt::format("{} B", b);
  if (b < 1024ull * 1024) return fmt::format("{:.1f} KiB", b / 1024.0);
  if (b < 1024ull * 1024 * 1024) return fmt::format("{:.1f} MiB", b / 1048576.0);
  return fmt::format("{:.2f} GiB", b / 1073741824.0);
}

}  // namespace tt::analysis
