#include "cache/policy_cache.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/error.h"

namespace tt::cache {

const char* policy_name(Policy p) {
  switch (p) {
    case Policy::LRU:
      return "lru";
    case Policy::LFU:
      return "lfu";
    case Policy::FIFO:
      return "fifo";
    case Policy::LRU2:
      return "lru-2";
    case Policy::LEAST_STALE:
      return "least-stale";
    case Policy::OPT:
      return "opt";
  }
  return "?";
}

std::optional<Policy> policy_from_name(const std::string& name) {
  std::string n;
  for (char c : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n == "lru") return Policy::LRU;
  if (n == "lfu") return Policy::LFU;
  if (n == "fifo") return Policy::FIFO;
  if (n == "lru-2" || n == "lru2" || n == "lru-k") return Policy::LRU2;
  if (n == "least-stale") return Policy::LEAST_STALE;
  if (n == "opt" || n == "belady" || n == "min") return Policy::OPT;
  return std::nullopt;
}

std::vector<size_t> next_use(const std::vector<Access>& stream) {
  std::vector<size_t> next(stream.size(), stream.size());
  std::unordered_map<uint64_t, size_t> later;
  later.reserve(stream.size());
  for (size_t i = stream.size(); i-- > 0;) {
    auto it = later.find(stream[i].key);
    if (it != later.end()) next[i] = it->second;
    if (!stream[i].prefetch) later[stream[i].key] = i;
  }
  return next;
}

PolicyCache::PolicyCache(Policy policy, uint64_t capacity, uint32_t n_phases, std::vector<size_t> next)
    : policy_(policy),
      capacity_(capacity),
      n_phases_(policy == Policy::LEAST_STALE ? std::max<uint32_t>(1, n_phases) : 1),
      next_(std::move(next)),
      orders_(n_phases_) {}

PolicyCache::Prio PolicyCache::prio(uint64_t key, const Entry& e) const {
  switch (policy_) {
    case Policy::LRU:
      return {e.last, 0, key};
    case Policy::LEAST_STALE:
      return {e.pass, e.last, key};
    case Policy::FIFO:
      return {e.inserted, 0, key};
    case Policy::LFU:
      return {e.count, e.last, key};
    case Policy::LRU2:
      return {e.before_last, e.last, key};
    case Policy::OPT:
      return {UINT64_MAX - e.next, e.last, key};
  }
  return {};
}

std::set<PolicyCache::Prio>& PolicyCache::order_of(const Entry& e) { return orders_[e.phase]; }

std::optional<PolicyCache::Prio> PolicyCache::first_unpinned(const std::set<Prio>& order) const {
  for (const Prio& p : order)
    if (pinned_.empty() || !pinned_.count(std::get<2>(p))) return p;
  return std::nullopt;
}

// LEAST_STALE's victim for an access of `phase`: the object last used in the oldest pass; among those of one pass,
// the one of the phase passed most recently (this phase first), whose next use is furthest under the cycle; then the
// least recently used. Each phase's order gives its candidate; the phases are compared here. Other policies: the
// first of their one order.
uint64_t PolicyCache::victim(uint32_t phase) const {
  if (policy_ != Policy::LEAST_STALE) {
    const std::optional<Prio> p = first_unpinned(orders_[0]);
    if (!p) fail("cache of {} bytes: every resident object is pinned, none can make room", capacity_);
    return std::get<2>(*p);
  }
  std::tuple<uint64_t, uint32_t, uint64_t, uint64_t> best{UINT64_MAX, 0, 0, 0};  // pass, back, last, key
  bool found = false;
  for (uint32_t back = 0; back < n_phases_; ++back) {
    const std::optional<Prio> p = first_unpinned(orders_[(phase + n_phases_ - back) % n_phases_]);
    if (!p) continue;
    const auto& [last_pass, last, key] = *p;
    best = std::min(best, {last_pass, back, last, key});
    found = true;
  }
  if (!found) fail("cache of {} bytes: every resident object is pinned, none can make room", capacity_);
  return std::get<3>(best);
}

uint64_t PolicyCache::next_of(size_t t) const {
  if (t >= next_.size())
    fail("OPT cache: access {} is past the {} accesses of the future it was given", t, next_.size());
  return next_[t];
}

// Brings a's object in (after a miss, or by a prefetch), evicting until it fits; `previous`: 1 + time of its latest
// demand use, 0 when none.
void PolicyCache::insert(const Access& a, uint64_t previous, bool prefetch) {
  while (used_ + a.bytes > capacity_) {
    const uint64_t key = victim(a.phase);
    auto v = resident_.find(key);
    order_of(v->second).erase(prio(key, v->second));
    used_ -= v->second.bytes;
    resident_.erase(v);
    out_.evicted.push_back(key);
  }
  Entry e;
  e.bytes = a.bytes;
  e.inserted = e.last = t_;
  e.pass = pass_;
  // A prefetched object has no use yet (LRU-2: among the first to go); its latest demand use before the prefetch
  // becomes the use before `last` at its first hit.
  e.before_last = prefetch ? 0 : previous;
  e.demand_before = previous;
  e.count = prefetch ? 0 : 1;
  e.next = policy_ == Policy::OPT ? next_of(t_) : 0;
  e.phase = policy_ == Policy::LEAST_STALE ? a.phase : 0;
  e.prefetched = prefetch;
  resident_.emplace(a.key, e);
  order_of(e).insert(prio(a.key, e));
  used_ += a.bytes;
  out_.loaded = true;
}

const Outcome& PolicyCache::access(const Access& a) {
  out_.hit = out_.loaded = out_.first = out_.useful = false;
  out_.evicted.clear();
  if (policy_ == Policy::LEAST_STALE && a.phase >= n_phases_)
    fail("least-stale cache: phase {} of key {} is outside its {} phases", a.phase, a.key, n_phases_);
  if (t_ > 0 && a.phase < last_phase_) ++pass_;
  last_phase_ = a.phase;
  if (a.prefetch) {
    if (!resident_.count(a.key) && a.bytes <= capacity_) insert(a, last_use_[a.key], true);
    ++t_;
    return out_;
  }
  uint64_t& seen = last_use_[a.key];
  const uint64_t previous = seen;
  seen = t_ + 1;
  out_.first = previous == 0;
  auto it = resident_.find(a.key);
  if (it != resident_.end()) {
    out_.hit = true;
    Entry& e = it->second;
    order_of(e).erase(prio(a.key, e));
    e.before_last = e.prefetched ? e.demand_before : e.last + 1;
    if (e.prefetched) out_.useful = true, e.prefetched = false;
    e.last = t_;
    e.pass = pass_;
    ++e.count;
    if (policy_ == Policy::OPT) e.next = next_of(t_);
    order_of(e).insert(prio(a.key, e));
  } else if (a.bytes <= capacity_) {  // else bypass: never fits
    insert(a, previous, false);
  }
  ++t_;
  return out_;
}

std::vector<bool> replay_pinned(PolicyCache& cache, const std::vector<Access>& stream,
                                const std::vector<uint64_t>& group, std::vector<uint64_t>* used_after) {
  TT_CHECK(stream.size() == group.size(), "{} accesses, {} groups", stream.size(), group.size());
  std::vector<bool> hits(stream.size());
  if (used_after) used_after->assign(stream.size(), 0);
  std::vector<uint64_t> pinned;
  for (size_t i = 0; i < stream.size(); ++i) {
    if (i > 0 && group[i] != group[i - 1]) {
      for (uint64_t k : pinned) cache.unpin(k);
      pinned.clear();
    }
    hits[i] = cache.access(stream[i]).hit;
    if (used_after) (*used_after)[i] = cache.used_bytes();
    cache.pin(stream[i].key);
    pinned.push_back(stream[i].key);
  }
  return hits;
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

}  // namespace tt::cache
