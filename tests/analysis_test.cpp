// Cache simulation on synthetic access streams with hand-computed answers; analysis and diff of real runs.
#include <gtest/gtest.h>

#include "analysis/cache_sim.h"
#include "core/error.h"

namespace tt::analysis {
namespace {

std::vector<Access> unit_stream(std::initializer_list<uint64_t> keys) {
  std::vector<Access> s;
  for (uint64_t k : keys) s.push_back({k, 1});
  return s;
}

// The textbook reference string: 1 2 3 4 1 2 5 1 2 3 4 5.
const std::vector<Access> kBelady = unit_stream({1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5});

TEST(CacheSim, FifoThreeFramesAndBeladysAnomaly) {
  CacheResult r3 = simulate_cache(kBelady, 3, CachePolicy::FIFO);
  EXPECT_EQ(r3.misses, 9u);
  EXPECT_EQ(r3.hits, 3u);
  EXPECT_EQ(r3.cold_misses, 5u);
  // More frames, more misses under FIFO.
  EXPECT_EQ(simulate_cache(kBelady, 4, CachePolicy::FIFO).misses, 10u);
}

TEST(CacheSim, LruThreeFrames) {
  // 1 2 3 | 4 ev1 | 1 ev2 | 2 ev3 | 5 ev4 | 1 hit | 2 hit | 3 ev5 | 4 ev1 | 5 ev2
  CacheResult r = simulate_cache(kBelady, 3, CachePolicy::LRU);
  EXPECT_EQ(r.misses, 10u);
  EXPECT_EQ(r.hits, 2u);
  EXPECT_EQ(r.evictions, 7u);
  EXPECT_EQ(simulate_cache(kBelady, 4, CachePolicy::LRU).misses, 8u);
}

TEST(CacheSim, OptThreeFrames) {
  // 4 evicts 3 (next use furthest), 5 evicts 4, 3 evicts 1 (1 and 2 never used again: least recent), 4 evicts 2.
  CacheResult r = simulate_cache(kBelady, 3, CachePolicy::OPT);
  EXPECT_EQ(r.misses, 7u);
  EXPECT_EQ(r.hits, 5u);
  EXPECT_EQ(simulate_cache(kBelady, 4, CachePolicy::OPT).misses, 6u);
}

TEST(CacheSim, LfuThreeFrames) {
  // Every object is used once before 1 and 2 are hit, so LFU evicts like LRU until then; then 1 and 2 (count 2)
  // stay and 5, 3, 4 (count 1) evict each other.
  CacheResult r = simulate_cache(kBelady, 3, CachePolicy::LFU);
  EXPECT_EQ(r.misses, 10u);
  EXPECT_EQ(r.hits, 2u);
}

TEST(CacheSim, LfuKeepsFrequentObject) {
  // a a a b c b c a, two frames.
  const auto s = unit_stream({'a', 'a', 'a', 'b', 'c', 'b', 'c', 'a'});
  // LFU keeps a (count 3): b and c evict each other -> misses a b c b c = 5, then a hits.
  EXPECT_EQ(simulate_cache(s, 2, CachePolicy::LFU).misses, 5u);
  // LRU: c evicts a, b c hit, a evicts b -> a b c a = 4.
  EXPECT_EQ(simulate_cache(s, 2, CachePolicy::LRU).misses, 4u);
  // FIFO: c evicts a (oldest), b c hit, a evicts b -> 4.
  EXPECT_EQ(simulate_cache(s, 2, CachePolicy::FIFO).misses, 4u);
  // OPT: c evicts a (next use 7, b's is 5) -> a b c a = 4.
  EXPECT_EQ(simulate_cache(s, 2, CachePolicy::OPT).misses, 4u);
}

TEST(CacheSim, FifoIgnoresHits) {
  // 1 2 1 3 1, two frames: FIFO evicts 1 at 3 although it was just used; LRU evicts 2.
  const auto s = unit_stream({1, 2, 1, 3, 1});
  EXPECT_EQ(simulate_cache(s, 2, CachePolicy::FIFO).misses, 4u);
  EXPECT_EQ(simulate_cache(s, 2, CachePolicy::LRU).misses, 3u);
}

TEST(CacheSim, VariableSizesAndBypass) {
  // Capacity 10: A(6) and B(6) do not fit together.
  std::vector<Access> s = {{'A', 6}, {'B', 6}, {'A', 6}};
  CacheResult r = simulate_cache(s, 10, CachePolicy::LRU);
  EXPECT_EQ(r.misses, 3u);
  EXPECT_EQ(r.bytes_missed, 18u);
  EXPECT_EQ(r.bytes_accessed, 18u);
  // C(20) never fits: it is read every time and evicts nothing.
  s = {{'A', 6}, {'C', 20}, {'A', 6}, {'C', 20}};
  r = simulate_cache(s, 10, CachePolicy::LRU);
  EXPECT_EQ(r.misses, 3u);
  EXPECT_EQ(r.bytes_missed, 46u);
  EXPECT_EQ(r.evictions, 0u);
  // Enough capacity: only cold misses.
  for (CachePolicy p : {CachePolicy::LRU, CachePolicy::LFU, CachePolicy::FIFO, CachePolicy::OPT}) {
    r = simulate_cache(kBelady, 5, p);
    EXPECT_EQ(r.misses, 5u) << policy_name(p);
    EXPECT_EQ(r.misses, r.cold_misses) << policy_name(p);
  }
  // Zero capacity: everything misses.
  EXPECT_EQ(simulate_cache(kBelady, 0, CachePolicy::OPT).misses, 12u);
}

TEST(CacheSim, OptNeverWorseThanOthersOnPages) {
  // A cyclic scan over 5 pages with 4 frames: LRU and FIFO miss every time, OPT misses once per cycle after warmup.
  std::vector<Access> s;
  for (int rep = 0; rep < 4; ++rep)
    for (uint64_t k = 0; k < 5; ++k) s.push_back({k, 4096});
  EXPECT_EQ(simulate_cache(s, 4 * 4096, CachePolicy::LRU).misses, 20u);
  EXPECT_EQ(simulate_cache(s, 4 * 4096, CachePolicy::FIFO).misses, 20u);
  // OPT: 5 cold misses (4 evicts 3), then 3 evicts 2 (t8), 2 evicts 1 (t12), 1 evicts 0 (t16, 0 never used again).
  CacheResult opt = simulate_cache(s, 4 * 4096, CachePolicy::OPT);
  EXPECT_EQ(opt.misses, 8u);
  EXPECT_EQ(opt.bytes_missed, opt.misses * 4096);
}

TEST(CacheSim, NextUse) {
  const auto s = unit_stream({1, 2, 1, 3});
  EXPECT_EQ(next_use(s), (std::vector<size_t>{2, 4, 4, 4}));
}

TEST(CacheSim, ReuseDistances) {
  const auto s = unit_stream({1, 2, 3, 1, 2, 2});
  const std::vector<uint64_t> d = reuse_distances(s);
  const uint64_t inf = UINT64_MAX;
  EXPECT_EQ(d, (std::vector<uint64_t>{inf, inf, inf, 2, 2, 0}));
  // Byte-weighted: A(4) B(8) A(4): 8 bytes between the two A accesses.
  std::vector<Access> w = {{'A', 4}, {'B', 8}, {'B', 8}, {'A', 4}};
  EXPECT_EQ(reuse_distances(w)[3], 8u);
  // LRU hits exactly the accesses whose distance + size fits.
  std::vector<Access> big;
  for (int rep = 0; rep < 3; ++rep)
    for (uint64_t k : {1, 2, 3, 1, 4, 2}) big.push_back({k, 1});
  const auto dist = reuse_distances(big);
  for (uint64_t cap = 1; cap <= 5; ++cap) {
    uint64_t hits = 0;
    for (uint64_t x : dist)
      if (x != inf && x + 1 <= cap) ++hits;
    EXPECT_EQ(simulate_cache(big, cap, CachePolicy::LRU).hits, hits) << "capacity " << cap;
  }
}

TEST(CacheSim, ParseSize) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("256K"), 256u * 1024);
  EXPECT_EQ(parse_size("1M"), 1048576u);
  EXPECT_EQ(parse_size("64MiB"), 64u * 1048576);
  EXPECT_EQ(parse_size("1.5k"), 1536u);
  EXPECT_EQ(parse_size("2G"), 2ull << 30);
  EXPECT_THROW(parse_size("x"), Error);
  EXPECT_THROW(parse_size("12Q"), Error);
}

}  // namespace
}  // namespace tt::analysis
