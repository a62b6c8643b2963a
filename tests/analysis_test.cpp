// Cache simulation on synthetic access streams with hand-computed answers; analysis and diff of real runs.
#include "analysis/analysis.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "analysis/bandwidth.h"
#include "analysis/cache_sim.h"
#include "analysis/diff.h"
#include "analysis/sample_stats.h"
#include "analysis/thread_time.h"
#include "core/error.h"
#include "serve/api.h"
#include "support/paths.h"
#include "trace/format.h"
#include "trace/run_data.h"
#include "trace/trace_file.h"
#include "tracer/experiment.h"

namespace tt::analysis {
namespace {

// Analysis options without the bandwidth probe (the tests do not look at it) and without a cache simulation.
AnalyzeOptions no_bandwidth() {
  AnalyzeOptions o;
  o.measure_bandwidth = false;
  return o;
}

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

TEST(CacheSim, Lru2ResistsOneTimeUse) {
  // a a b c a, two frames: c evicts b under LRU-2 (b used once) where LRU evicts a (least recent).
  const auto s = unit_stream({'a', 'a', 'b', 'c', 'a'});
  EXPECT_EQ(simulate_cache(s, 2, CachePolicy::LRU2).misses, 3u);
  EXPECT_EQ(simulate_cache(s, 2, CachePolicy::LRU).misses, 4u);
}

// Two layers (phases) per token, two experts each: layer 0 uses A C, layer 1 uses B D, three tokens, three frames.
std::vector<Access> two_layer_tokens(int tokens) {
  std::vector<Access> s;
  for (int t = 0; t < tokens; ++t)
    for (auto [key, phase] : {std::pair{'A', 0u}, {'C', 0u}, {'B', 1u}, {'D', 1u}})
      s.push_back({uint64_t(key), 1, phase});
  return s;
}

TEST(CacheSim, LeastStaleEvictsTheLayerJustPassed) {
  const auto s = two_layer_tokens(3);
  // LRU: a cyclic scan of 4 objects in 3 frames misses every time.
  EXPECT_EQ(simulate_cache(s, 3, CachePolicy::LRU).misses, 12u);
  // Least-stale: in each pass the layer-1 expert loaded second evicts the other (same pass, current layer) and the
  // next pass's first layer-1 load evicts the previous pass's layer-1 expert: A and C stay. 4 cold + 2 a pass.
  EXPECT_EQ(simulate_cache(s, 3, CachePolicy::LEAST_STALE).misses, 8u);
  // OPT: D evicts B (next use furthest), B evicts C, C evicts A (never used again).
  EXPECT_EQ(simulate_cache(s, 3, CachePolicy::OPT).misses, 6u);
  // One phase: least-stale is LRU.
  std::vector<Access> flat = s;
  for (Access& a : flat) a.phase = 0;
  EXPECT_EQ(simulate_cache(flat, 3, CachePolicy::LEAST_STALE).misses, 12u);
}

// An independent replay for equal-sized objects: resident objects in a vector, the victim found by the policy's rule
// written out over the whole history (quadratic; for tests only).
uint64_t naive_misses(const std::vector<Access>& s, size_t frames, CachePolicy p) {
  struct Resident {
    uint64_t key;
    size_t inserted, last, count;
    uint32_t phase;
  };
  uint32_t n_phases = 1;
  for (const Access& a : s) n_phases = std::max(n_phases, a.phase + 1);
  std::vector<Resident> res;
  std::map<uint64_t, std::vector<size_t>> uses;  // every use so far
  uint64_t misses = 0;
  std::vector<size_t> pass_of(s.size(), 0);  // the pass of each access
  for (size_t t = 1; t < s.size(); ++t) pass_of[t] = pass_of[t - 1] + (s[t].phase < s[t - 1].phase ? 1 : 0);
  for (size_t t = 0; t < s.size(); ++t) {
    auto hit = std::find_if(res.begin(), res.end(), [&](const Resident& r) { return r.key == s[t].key; });
    if (hit != res.end()) {
      hit->last = t;
      ++hit->count;
    } else {
      ++misses;
      if (frames > 0 && res.size() == frames) {
        auto second_last = [&](uint64_t key) {  // 1 + the time of the use before the latest, 0 when none
          const auto& u = uses[key];
          return u.size() >= 2 ? u[u.size() - 2] + 1 : size_t{0};
        };
        auto next_use_of = [&](uint64_t key) {
          for (size_t j = t + 1; j < s.size(); ++j)
            if (s[j].key == key) return j;
          return s.size();
        };
        size_t v = 0;
        auto better = [&](const Resident& a, const Resident& b) {  // a is evicted before b
          switch (p) {
            case CachePolicy::LRU:
              return a.last < b.last;
            case CachePolicy::FIFO:
              return a.inserted < b.inserted;
            case CachePolicy::LFU:
              return std::pair(a.count, a.last) < std::pair(b.count, b.last);
            case CachePolicy::LRU2:
              return std::pair(second_last(a.key), a.last) < std::pair(second_last(b.key), b.last);
            case CachePolicy::OPT:
              return next_use_of(a.key) != next_use_of(b.key) ? next_use_of(a.key) > next_use_of(b.key)
                                                              : a.last < b.last;
            case CachePolicy::LEAST_STALE: {
              // The pass of the last use, then how many phases back the object's phase is, then the last use.
              auto rank = [&](const Resident& r) {
                return std::tuple(pass_of[r.last], (s[t].phase + n_phases - r.phase) % n_phases, r.last);
              };
              return rank(a) < rank(b);
            }
          }
          return false;
        };
        for (size_t i = 1; i < res.size(); ++i)
          if (better(res[i], res[v])) v = i;
        res.erase(res.begin() + static_cast<std::ptrdiff_t>(v));
      }
      if (frames > 0) res.push_back({s[t].key, t, t, 1, s[t].phase});
    }
    uses[s[t].key].push_back(t);
  }
  return misses;
}

TEST(CacheSim, EveryPolicyEqualsAnIndependentReplay) {
  // Expert-like workloads: tokens pass 4 layers in order, each choosing 2 of 8 experts with a skewed popularity.
  std::mt19937 rng(7);
  std::discrete_distribution<int> pick({8, 6, 4, 3, 2, 1, 1, 1});
  std::vector<Access> s;
  for (int token = 0; token < 60; ++token)
    for (uint32_t layer = 0; layer < 4; ++layer) {
      const int a = pick(rng);
      int b = pick(rng);
      while (b == a) b = pick(rng);
      for (int e : {a, b}) s.push_back({layer * 8u + static_cast<uint32_t>(e), 1, layer});
    }
  const CachePolicy all[] = {CachePolicy::LRU,  CachePolicy::LFU,         CachePolicy::FIFO,
                             CachePolicy::LRU2, CachePolicy::LEAST_STALE, CachePolicy::OPT};
  for (uint64_t frames : {0, 1, 3, 8, 16, 31, 32}) {
    const uint64_t opt = simulate_cache(s, frames, CachePolicy::OPT).misses;
    for (CachePolicy p : all) {
      const CacheResult r = simulate_cache(s, frames, p);
      EXPECT_EQ(r.misses, naive_misses(s, frames, p)) << policy_name(p) << " frames " << frames;
      EXPECT_LE(opt, r.misses) << policy_name(p) << " frames " << frames;
      if (frames >= 32) {
        EXPECT_EQ(r.misses, r.cold_misses) << policy_name(p);  // holds every expert
      }
    }
  }
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
  EXPECT_THROW(parse_size("99999999999G"), Error);  // past 2^63: llround's result would be unspecified
}

// A traced run into a fresh directory under the test temp dir.
std::string make_run(const std::string& model, const std::string& name, int threads, int n_predict,
                     float temperature = 0, uint64_t seed = 42, bool values = true) {
  const std::string dir = ::testing::TempDir() + "tt-analysis-" + name;
  std::filesystem::remove_all(dir);
  ExperimentOptions o;
  o.model_path = model;
  o.prompt = "Once upon a time";
  o.n_predict = n_predict;
  o.n_threads = threads;
  o.sampling.temperature = temperature;
  o.sampling.seed = seed;
  o.run_dir = dir;
  o.trace_options.values = values;
  o.progress = false;
  run_experiment(o, nullptr);
  return dir;
}

// The MoE section of a real run of each shared MoE model, against counts and a replay made here from the trace's
// routing records alone.
class AnalysisMoe : public ::testing::TestWithParam<std::string> {};

TEST_P(AnalysisMoe, PicksAndCacheReplayEqualAnIndependentCount) {
  TT_REQUIRE_SHARED();
  const std::string dir = make_run(test::shared_path("models/" + GetParam() + ".gguf"), "moe-" + GetParam(), 2, 8);
  const RunData run = load_run(dir);
  ASSERT_FALSE(run.trace.routing.empty());
  AnalyzeOptions opt;
  opt.measure_bandwidth = false;
  opt.experts.scope = CacheScope::PER_LAYER;
  for (const char* size : {"1", "2", "3"}) opt.experts.sizes.push_back(parse_expert_cache_size(size));
  const Report rep = analyze(run, opt);
  ASSERT_TRUE(rep.moe.has_value());
  const MoeSection& m = *rep.moe;
  const int n_expert = run.model_config().value("n_expert", 0);
  ASSERT_GT(n_expert, 0);
  EXPECT_EQ(m.shape.n_expert, n_expert);

  // Picks per (layer, expert), and per layer the experts each step loads, from the records.
  std::map<int, std::vector<uint64_t>> picks;
  std::map<int, std::vector<Access>> loads;  // per layer, unit-sized (one layer's experts are the same size)
  std::map<uint32_t, Phase> phase;
  for (const trace::StepMarker& s : run.trace.steps) phase[s.step] = s.phase;
  std::map<std::pair<uint32_t, int>, std::vector<uint32_t>> step_layer;
  for (const trace::RoutingRecord& r : run.trace.routing) {
    auto& p = picks[r.layer];
    p.resize(n_expert);
    std::vector<uint32_t>& set = step_layer[{r.step, r.layer}];
    for (uint32_t e : r.experts) {
      ++p[e];
      if (std::find(set.begin(), set.end(), e) == set.end()) set.push_back(e);
    }
  }
  for (auto& [key, experts] : step_layer) {
    if (phase[key.first] == Phase::PROMPT) std::sort(experts.begin(), experts.end());
    for (uint32_t e : experts) loads[key.second].push_back({e, 1});
  }
  ASSERT_EQ(m.layers.size(), picks.size());
  for (const LayerExperts& l : m.layers) EXPECT_EQ(l.picks, picks[l.layer]) << "layer " << l.layer;

  // Per-layer caches of 1, 2, 3 experts: every policy's hits and misses equal the independent replay.
  ASSERT_EQ(m.cache.size(), 3 * opt.experts.policies.size());
  for (const ExpertCacheResult& c : m.cache) {
    uint64_t misses = 0, accesses = 0;
    for (const auto& [layer, stream] : loads) {
      misses += naive_misses(stream, std::stoul(c.size), c.policy);
      accesses += stream.size();
    }
    EXPECT_EQ(c.misses, misses) << policy_name(c.policy) << " size " << c.size;
    EXPECT_EQ(c.accesses, accesses);
    EXPECT_EQ(c.hits + c.misses, c.accesses);
  }
  // A cache of every expert misses only the first use of each.
  opt.experts.sizes = {parse_expert_cache_size(std::to_string(n_expert))};
  const Report whole = analyze(run, opt);
  for (const ExpertCacheResult& c : whole.moe->cache) EXPECT_EQ(c.misses, c.cold_misses);
  // OPT is never beaten: at each size no policy misses less.
  for (const ExpertCacheResult& c : m.cache)
    for (const ExpertCacheResult& o : m.cache)
      if (o.size == c.size && o.policy == CachePolicy::OPT) {
        EXPECT_GE(c.misses, o.misses) << policy_name(c.policy) << " size " << c.size;
      }
  // Sizes in total slots: L and 2L slots over L routed layers (every layer's experts the same size in these models)
  // are 1 and 2 experts per layer, in both scopes.
  const size_t n_layers = m.shape.layers.size();
  for (CacheScope scope : {CacheScope::PER_LAYER, CacheScope::GLOBAL}) {
    opt.experts.scope = scope;
    opt.experts.sizes = expert_cache_sizes_from_list("1,2");
    const Report per_layer = analyze(run, opt);
    opt.experts.sizes = expert_cache_sizes_from_list(fmt::format("{}slots,{}slots", n_layers, 2 * n_layers));
    const Report slots = analyze(run, opt);
    ASSERT_EQ(slots.moe->cache.size(), per_layer.moe->cache.size());
    for (size_t i = 0; i < slots.moe->cache.size(); ++i) {
      EXPECT_EQ(slots.moe->cache[i].capacity_bytes, per_layer.moe->cache[i].capacity_bytes) << scope_name(scope) << i;
      EXPECT_EQ(slots.moe->cache[i].misses, per_layer.moe->cache[i].misses) << scope_name(scope) << i;
    }
  }
  // Expert bytes are read in the expert layers only, and each generated token reads n_used experts' slabs a layer.
  ASSERT_TRUE(m.bytes_per_token.count("GENERATE"));
  uint64_t one_token = 0;
  for (uint64_t b : m.shape.expert_bytes) one_token += b * static_cast<uint64_t>(m.shape.n_used);
  EXPECT_DOUBLE_EQ(m.bytes_per_token.at("GENERATE").experts, static_cast<double>(one_token));
}

INSTANTIATE_TEST_SUITE_P(Models, AnalysisMoe,
                         ::testing::Values("synth-mixtral-256.Q4_K_M", "synth-qwen2moe-256.Q8_0",
                                           "synth-olmoe-256.Q4_K_M", "synth-qwen3moe-256.Q4_K_M"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(AnalysisMoe, ExpertCacheSizes) {
  EXPECT_EQ(parse_expert_cache_size("8").unit, ExpertCacheSize::Unit::EXPERTS_PER_LAYER);
  EXPECT_EQ(parse_expert_cache_size("25%").value, 25.0);
  EXPECT_EQ(parse_expert_cache_size("256M").value, 256.0 * 1024 * 1024);
  EXPECT_EQ(parse_expert_cache_size("96slots").unit, ExpertCacheSize::Unit::SLOTS);
  EXPECT_EQ(parse_expert_cache_size("96slots").value, 96.0);
  for (const char* bad : {"0", "0%", "101%", "%", "x%", "-3", "12Q", "9999999999", "0slots", "slots", "1.5slots",
                          "-2slots", "9999999999slots"})
    EXPECT_THROW(parse_expert_cache_size(bad), Error) << bad;
  EXPECT_THROW(scope_from_name("layer"), Error);
}

// The viewer's /expert-cache answers `analyze --expert-cache`'s table for the same parameters (one replay, not two),
// with defaults for the whole curve, and refuses bad parameters with a 400 naming them.
TEST(AnalysisMoe, ViewerExpertCacheIsAnalyzes) {
  TT_REQUIRE_SHARED();
  const std::string dir = make_run(test::shared_path("models/synth-qwen3moe-256.Q4_K_M.gguf"), "moe-api", 2, 6);
  const RunData run = load_run(dir);
  const serve::Api api({dir});
  auto get = [&](const serve::Params& p) {
    const serve::Response r = api.handle("/api/runs/0/expert-cache", p);
    return std::make_pair(r.status, nlohmann::json::parse(r.body));
  };
  for (const char* scope : {"global", "per-layer"})
    for (const char* prefetch : {"none", "previous-token"}) {
      AnalyzeOptions opt;
      opt.measure_bandwidth = false;
      opt.experts.sizes = expert_cache_sizes_from_list("1,4,25%,64K");
      opt.experts.policies = policies_from_list("lru,least-stale,opt");
      opt.experts.scope = scope_from_name(scope);
      opt.experts.prefetch = prefetch_from_name(prefetch);
      const nlohmann::json a = to_json(analyze(run, opt))["moe"];
      const auto [status, v] = get(
          {{"sizes", "1,4,25%,64K"}, {"policies", "lru,least-stale,opt"}, {"scope", scope}, {"prefetch", prefetch}});
      ASSERT_EQ(status, 200) << v.dump();
      EXPECT_EQ(v["results"], a["expert_cache"]["results"]) << scope << " " << prefetch;
      EXPECT_EQ(v["scope"], scope);
      EXPECT_EQ(v["prefetch"], prefetch);
      EXPECT_EQ(v["tokens"], a["tokens"]);
      EXPECT_EQ(v["n_expert"], a["n_expert"]);
    }
  // Defaults: every policy at 1, 2, 4, ... experts per layer up to all of them, which misses only first uses.
  const auto [status, v] = get({});
  ASSERT_EQ(status, 200) << v.dump();
  const int n_expert = v["n_expert"];
  std::vector<std::string> sizes;
  for (int n = 1; n < n_expert; n *= 2) sizes.push_back(std::to_string(n));
  sizes.push_back(std::to_string(n_expert));
  ASSERT_EQ(v["results"].size(), sizes.size() * 6);
  for (size_t i = 0; i < v["results"].size(); ++i) EXPECT_EQ(v["results"][i]["size"], sizes[i / 6]);
  for (const auto& row : v["results"])
    if (row["size"] == sizes.back()) {
      EXPECT_EQ(row["misses"], row["cold_misses"]) << row.dump();
    }
  EXPECT_EQ(v["read_rate_source"], "none");  // no --io-trace: no load time
  EXPECT_TRUE(v["results"][0]["load_seconds_per_token"].is_null());
  const auto [given_status, given] = get({{"sizes", "2"}, {"policies", "lru"}, {"read_gbps", "2"}});
  ASSERT_EQ(given_status, 200);
  EXPECT_DOUBLE_EQ(given["results"][0]["load_seconds_per_token"].get<double>(),
                   given["results"][0]["bytes_loaded_per_token"].get<double>() / 2e9);

  std::string many_sizes;  // 50 sizes x 6 policies: more replays than a request may ask for
  for (int i = 1; i <= 50; ++i) many_sizes += std::to_string(i) + ",";
  for (const auto& [params, words] :
       std::vector<std::pair<serve::Params, std::string>>{{{{"sizes", "0"}}, "expert cache size '0'"},
                                                          {{{"sizes", ","}}, "no expert cache size"},
                                                          {{{"policies", "mru"}}, "unknown cache policy 'mru'"},
                                                          {{{"policies", ""}}, "no cache policy"},
                                                          {{{"scope", "layer"}}, "unknown cache scope 'layer'"},
                                                          {{{"prefetch", "next"}}, "unknown expert prefetch 'next'"},
                                                          {{{"prefetch", "predicted"}}, "no expert predictions"},
                                                          {{{"read_gbps", "-1"}}, "parameter 'read_gbps'"},
                                                          {{{"sizes", many_sizes}}, "replays a request"}}) {
    const auto [st, e] = get(params);
    EXPECT_EQ(st, 400) << params.begin()->first << ": " << e.dump();
    EXPECT_NE(e.value("error", "").find(words), std::string::npos) << e.dump();
  }
  const std::string dense = make_run(test::repo_path("models/stories260K.gguf"), "dense-api", 1, 2);
  EXPECT_EQ(serve::Api({dense}).handle("/api/runs/0/expert-cache", {}).status, 404);
}

// The storage read rate a run measured: bytes its workers read from storage over the time of the ops that read.
TEST(AnalysisIo, StorageReadRate) {
  trace::TraceContents t;
  EXPECT_EQ(storage_reads(t).bytes_per_s(), 0.0);
  for (uint32_t node = 0; node < 3; ++node) {
    trace::OpRecord o;
    o.node = node;
    o.start_ns = node * 10'000'000;
    o.end_ns = o.start_ns + (node + 1) * 1'000'000;  // 1, 2, 3 ms
    t.ops.push_back(o);
  }
  trace::IoRecord io;
  io.node = 0;
  io.workers = {{0, 1, 0, 1'000'000}, {1, 0, 0, 2'000'000}};  // 3 MB in op 0's 1 ms
  t.io.push_back(io);
  io.node = 1;
  io.workers = {{0, 0, 5, 0}};  // reads nothing from storage: not part of the rate
  t.io.push_back(io);
  io.node = 2;
  io.workers = {{0, 0, 0, 3'000'000}};  // 3 MB in 3 ms
  t.io.push_back(io);
  const StorageReads s = storage_reads(t);
  EXPECT_EQ(s.bytes, 6'000'000u);
  EXPECT_EQ(s.ns, 4'000'000u);
  EXPECT_DOUBLE_EQ(s.bytes_per_s(), 1.5e9);
  EXPECT_DOUBLE_EQ(io_summary(t)["storage_read_bytes_per_s"].get<double>(), 1.5e9);
}

// --read-gbps's default: the storage read rate the run measured with --io-trace; without it, the load time says it
// needs --read-gbps instead of guessing one.
TEST(AnalysisMoe, LoadTimeDefaultsToTheRunsMeasuredReadRate) {
  TT_REQUIRE_SHARED();
  const std::string dir = make_run(test::shared_path("models/synth-qwen3moe-256.Q4_K_M.gguf"), "moe-rate", 1, 4);
  RunData run = load_run(dir);
  ASSERT_TRUE(run.trace.io.empty());
  AnalyzeOptions opt;
  opt.measure_bandwidth = false;
  opt.experts.sizes = expert_cache_sizes_from_list("2");
  opt.experts.policies = {CachePolicy::LRU};
  {
    const Report rep = analyze(run, opt);
    const nlohmann::json j = to_json(rep)["moe"]["expert_cache"];
    EXPECT_EQ(j["read_rate_source"], "none");
    EXPECT_TRUE(j["read_bytes_per_s"].is_null());
    EXPECT_TRUE(j["results"][0]["load_seconds_per_token"].is_null());
    EXPECT_NE(render_text(rep).find("load time/token: needs --read-gbps"), std::string::npos) << render_text(rep);
  }
  // An IO record of a run made with --io-trace: 4 MiB read from storage during one op.
  const trace::OpRecord& op = run.trace.ops.at(run.trace.ops.size() / 2);
  ASSERT_GT(op.end_ns, op.start_ns);
  trace::IoRecord io;
  io.step = op.step;
  io.node = op.node;
  io.workers = {{0, 1, 0, 4 << 20}};
  run.trace.io.push_back(io);
  const double measured = static_cast<double>(4 << 20) * 1e9 / static_cast<double>(op.end_ns - op.start_ns);
  {
    const Report rep = analyze(run, opt);
    const nlohmann::json j = to_json(rep)["moe"]["expert_cache"];
    EXPECT_EQ(j["read_rate_source"], "io-trace");
    EXPECT_DOUBLE_EQ(j["read_bytes_per_s"].get<double>(), measured);
    EXPECT_DOUBLE_EQ(j["results"][0]["load_seconds_per_token"].get<double>(),
                     j["results"][0]["bytes_loaded_per_token"].get<double>() / measured);
    EXPECT_NE(render_text(rep).find("the storage read rate the run measured"), std::string::npos);
  }
  // --read-gbps given: it wins over the measured rate.
  opt.experts.read_bytes_per_s = 3e9;
  const nlohmann::json j = to_json(analyze(run, opt))["moe"]["expert_cache"];
  EXPECT_EQ(j["read_rate_source"], "--read-gbps");
  EXPECT_DOUBLE_EQ(j["read_bytes_per_s"].get<double>(), 3e9);
}

TEST(AnalysisRun, StoriesReport) {
  const std::string dir = make_run(test::repo_path("models/stories260K.gguf"), "stories", 1, 6);
  const RunData run = load_run(dir);
  AnalyzeOptions opt;
  opt.measure_bandwidth = false;
  opt.cache_sizes = {64 * 1024, 256 * 1024, 4 << 20};
  const Report report = analyze(run, opt);
  const nlohmann::json r = to_json(report);

  // Order: every step reads the same tensors in the same order, layer by layer.
  const auto& ord = r["order"];
  EXPECT_EQ(ord["repeat"]["steps_compared"], 5);
  EXPECT_EQ(ord["repeat"]["same_tensors_share"].get<double>(), 1.0);
  EXPECT_EQ(ord["run"]["steps_with_layers_ascending"], 6);
  // Generation steps read different embedding rows, so their exact ranges differ from step to step.
  EXPECT_LT(ord["repeat"]["same_reads_share"].get<double>(), 1.0);

  // Hot/cold: only token_embd has bytes never read: the rows of tokens never fed in.
  std::set<int32_t> tokens;
  for (const auto& s : run.steps)
    for (int32_t t : s.input_tokens) tokens.insert(t);
  bool seen_embd = false;
  for (const auto& t : r["hot_cold"]["tensors"]) {
    if (t["tensor"] == "token_embd.weight") {
      seen_embd = true;
      const uint64_t row = 64 * 4;
      EXPECT_EQ(t["distinct_bytes_read"].get<uint64_t>(), tokens.size() * row);
      EXPECT_EQ(t["never_read_bytes"].get<uint64_t>(), t["size_bytes"].get<uint64_t>() - tokens.size() * row);
    } else {
      EXPECT_EQ(t["never_read_bytes"], 0) << t["tensor"];
      EXPECT_EQ(t["steps_reading"], 6) << t["tensor"];
    }
  }
  EXPECT_TRUE(seen_embd);
  EXPECT_GT(r["hot_cold"]["never_read"]["file_bytes_never_read"].get<uint64_t>(), 0u);

  // Sources: every generation step reads the same model-file bytes.
  uint64_t gen_bytes = 0;
  for (const auto& s : r["sources"]["steps"]) {
    if (s["step"] == 0) continue;
    if (!gen_bytes) gen_bytes = s["MODEL_FILE"]["bytes"];
    EXPECT_EQ(s["MODEL_FILE"]["bytes"], gen_bytes);
    EXPECT_GT(s["KV_CACHE"]["bytes"].get<uint64_t>(), 0u);
  }
  // Predictability: the tensor sequence is exactly the previous step's.
  EXPECT_EQ(r["predictability"]["tensors"]["same_as_last_step"]["hit_rate"].get<double>(), 1.0);

  // Memory: the KV cache is all live from the start; the activation peak names live tensors.
  bool kv = false;
  for (const auto& p : r["memory"]["pools"])
    if (p["pool"] == "KV_CACHE") {
      kv = true;
      EXPECT_EQ(p["live_tensors"], 10);  // 5 layers, K and V
    }
  EXPECT_TRUE(kv);

  // Cache simulation: with room for every page only first touches miss; OPT never misses more than the others.
  const auto& cs = r["cache_sim"];
  std::map<uint64_t, uint64_t> opt_misses;
  for (const auto& x : cs["results"])
    if (x["policy"] == "opt") opt_misses[x["capacity"]] = x["misses"];
  for (const auto& x : cs["results"]) {
    EXPECT_LE(opt_misses[x["capacity"]], x["misses"].get<uint64_t>()) << x.dump();
    if (x["capacity"] == (4 << 20)) {
      EXPECT_EQ(x["misses"], x["cold_misses"]) << x.dump();
    }
  }
  // The LRU curve from reuse distances agrees with the LRU simulation at the simulated capacities.
  for (const auto& m : r["hot_cold"]["lru_miss_ratio_curve"])
    for (const auto& x : cs["results"])
      if (x["policy"] == "lru" && x["capacity"] == m["capacity"]) {
        EXPECT_EQ(x["misses"], m["misses"]);
      }

  // Thread time: one thread, whose time in nodes and outside them make up each step.
  for (const auto& [phase, p] : r["thread_time"]["phases"].items()) {
    ASSERT_EQ(p["threads"].size(), 1u) << phase;
    const auto& th = p["threads"][0];
    EXPECT_EQ(th["busy_ns_total"].get<uint64_t>() + th["outside_ns_total"].get<uint64_t>(),
              p["step_ns_total"].get<uint64_t>())
        << phase;
    EXPECT_GT(th["busy_ns_total"].get<uint64_t>(), 0u) << phase;
    EXPECT_LE(th["busy_ns_median_step"].get<double>(), p["step_ns_median"].get<double>()) << phase;
  }
  const std::string text = render_text(report);
  EXPECT_NE(text.find("== Order of MODEL_FILE reads =="), std::string::npos);
  EXPECT_NE(text.find("== Thread time, GENERATE"), std::string::npos);
  EXPECT_NE(text.find("== Cache simulation"), std::string::npos);
  const std::string figs = ::testing::TempDir() + "tt-analysis-figs";
  std::filesystem::create_directories(figs);
  for (const std::string& f : write_figures(report, figs)) {
    std::ifstream in(figs + "/" + f);
    std::string head(4, ' ');
    in.read(head.data(), 4);
    EXPECT_EQ(head, "<svg") << f;
  }
}

uint64_t t1_total(const nlohmann::json& r) {
  const nlohmann::json& t1 = r["phases"]["GENERATE"]["threads"][1];
  return t1["busy_ns_total"].get<uint64_t>() + t1["outside_ns_total"].get<uint64_t>();
}

// Two threads, hand-placed spans (ns): the gaps are the parts of [start, end) that no span of the thread covers.
TEST(AnalysisThreadTime, GapsAndBusyTimeFromSpans) {
  trace::TraceContents t;
  auto step = [&](uint32_t n, Phase phase, uint64_t start, uint64_t end, bool ended) {
    trace::StepMarker m;
    m.step = n, m.phase = phase, m.start_ns = start, m.end_ns = end, m.ended = ended;
    t.steps.push_back(m);
  };
  auto span = [&](uint32_t n, uint16_t thread, uint64_t start, uint64_t end) {
    t.spans.push_back({n, 0, thread, start, end});
  };
  step(0, Phase::PROMPT, 0, 1000, true);
  span(0, 0, 0, 1000);
  span(0, 1, 200, 700);
  step(1, Phase::GENERATE, 1000, 11000, true);
  // Thread 0: one gap of 1000. Thread 1: gaps 1000, 500, 4500; its last span ends after the step and counts to the end.
  span(1, 0, 7000, 11000);  // out of order: sorted by the analysis
  span(1, 0, 1000, 4000);
  span(1, 0, 4000, 6000);
  span(1, 1, 2000, 4000);
  span(1, 1, 4500, 6000);
  span(1, 1, 10500, 12000);
  step(2, Phase::GENERATE, 11500, 12000, false);  // not ended: left out, but it ends step 1's after-step time
  span(2, 0, 11500, 12000);

  const nlohmann::json r = thread_time(t);
  ASSERT_TRUE(r["phases"].contains("GENERATE")) << r.dump();
  const nlohmann::json& g = r["phases"]["GENERATE"];
  EXPECT_EQ(g["steps"], 1);
  EXPECT_DOUBLE_EQ(g["step_ns_median"].get<double>(), 10000);
  EXPECT_DOUBLE_EQ(g["after_step_ns_median"].get<double>(), 500);  // step 1's end to step 2's begin
  EXPECT_DOUBLE_EQ(r["phases"]["PROMPT"]["after_step_ns_median"].get<double>(), 0);
  ASSERT_EQ(g["threads"].size(), 2u);
  const nlohmann::json& t0 = g["threads"][0];
  EXPECT_DOUBLE_EQ(t0["busy_ns_median_step"].get<double>(), 9000);
  EXPECT_EQ(t0["busy_ns_total"], 9000u);
  EXPECT_EQ(t1_total(r), 10000u);
  EXPECT_DOUBLE_EQ(t0["outside_ns_median_step"].get<double>(), 1000);
  EXPECT_DOUBLE_EQ(t0["gaps_median_step"].get<double>(), 1);
  EXPECT_DOUBLE_EQ(t0["outside_share_in_short_gaps"].get<double>(), 0);  // 1000 ns is not under 1 us
  const nlohmann::json& t1 = g["threads"][1];
  EXPECT_DOUBLE_EQ(t1["busy_ns_median_step"].get<double>(), 4000);
  EXPECT_DOUBLE_EQ(t1["outside_ns_median_step"].get<double>(), 6000);
  EXPECT_DOUBLE_EQ(t1["gaps_median_step"].get<double>(), 3);
  EXPECT_DOUBLE_EQ(t1["gap_median_ns"].get<double>(), 1000);
  EXPECT_DOUBLE_EQ(t1["gap_p90_ns"].get<double>(), 4500);
  EXPECT_DOUBLE_EQ(t1["outside_share_in_short_gaps"].get<double>(), 500.0 / 6000);
  // The prompt step: thread 1 waits before and after its share.
  const nlohmann::json& p1 = r["phases"]["PROMPT"]["threads"][1];
  EXPECT_DOUBLE_EQ(p1["busy_ns_median_step"].get<double>(), 500);
  EXPECT_DOUBLE_EQ(p1["gaps_median_step"].get<double>(), 2);
}

// A run directory made by hand: trace.bin of one step whose records `records` writes (ids: an op's name, output and
// one input), and a memory-map.json of a model file of `file_size` bytes (none when nullopt).
std::string crafted_run(const std::string& name, std::optional<uint64_t> file_size,
                        const std::function<void(trace::TraceWriter&, const uint32_t*)>& records) {
  const std::string dir = ::testing::TempDir() + "tt-crafted-" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    trace::TraceWriter w(dir + "/trace.bin");
    const uint32_t ids[3] = {w.intern("ffn_up-0"), w.intern("ffn_up-0"), w.intern("blk.0.ffn_up.weight")};
    w.step_begin({0, Phase::PROMPT, 0, 1, 10, 0, -1, 0, false});
    records(w, ids);
    w.step_end({0, Phase::PROMPT, 0, 1, 10, 20, 5, 1.0f, true});
    w.flush();
  }
  if (file_size)
    std::ofstream(dir + "/memory-map.json") << nlohmann::json{
        {"format", "tensortrace.memory-map"}, {"file_size", *file_size}, {"tensors", nlohmann::json::array()}};
  return dir;
}

// One worker's share of a crafted op (TraceWriter::op's times).
constexpr uint64_t kShare[] = {10, 20};

// A MUL_MAT of step `step` reading the model file at each of `reads` (offset, length).
trace::OpRecord file_reading_op(uint32_t step, std::initializer_list<std::pair<uint64_t, uint64_t>> reads) {
  trace::OpRecord o;
  o.step = step;
  o.op = OpKind::MUL_MAT;
  o.inputs.resize(1);
  o.inputs[0].pool = Pool::MODEL_FILE;
  for (auto [offset, length] : reads) o.inputs[0].ranges.push_back({Pool::MODEL_FILE, -1, offset, length, -1, -1});
  o.inputs[0].offset = o.inputs[0].ranges.front().offset;
  o.inputs[0].bytes = o.inputs[0].ranges.front().length;
  return o;
}

// Every loader of a run directory refuses it with a message containing `expected` (none sizes anything first).
void expect_every_loader_rejects(const std::string& dir, const std::string& expected) {
  auto check = [&](const char* loader, auto&& load) {
    try {
      load();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << loader << ": " << e.what();
      return;
    }
    ADD_FAILURE() << loader << " accepted " << dir << "; expected: " << expected;
  };
  check("analyze", [&] { analyze_run(load_run(dir), no_bandwidth()); });
  check("tt::load_run", [&] { tt::load_run(dir); });
  check("serve::ServedRun", [&] { serve::ServedRun run(dir); });
  check("run --prefetch from:RUN", [&] {
    ExperimentOptions o;
    o.model_path = test::repo_path("models/stories260K.gguf");
    o.prompt = "Once";
    o.n_predict = 1;
    o.run_dir = dir + "-prefetching";
    o.prefetch = "from:" + dir;
    o.progress = false;
    run_experiment(o, nullptr);
  });
}

// An op record of a step the trace does not have (2^32 - 16): analyze and serve sized per-step tables by it (100 GB).
// The trace reader refuses it (an op record belongs to the step begun last).
TEST(AnalysisRunChecks, OpOfAStepOutsideTheTrace) {
  const std::string dir = crafted_run("far-step", 1 << 20, [](trace::TraceWriter& w, const uint32_t* ids) {
    w.op(file_reading_op(0xFFFFFFF0, {{0, 4096}}), ids, kShare);
  });
  expect_every_loader_rejects(dir, "op record of step 4294967280 outside that step's STEP_BEGIN and STEP_END");
}

// A STEP_BEGIN numbered out of order: readers size per-step tables by the step numbers the markers give.
TEST(AnalysisRunChecks, StepMarkersNumberedInOrder) {
  const std::string dir = crafted_run("far-marker", 1 << 20, [](trace::TraceWriter& w, const uint32_t*) {
    w.step_end({0, Phase::PROMPT, 0, 1, 10, 20, 5, 1.0f, true});
    w.step_begin({0xFFFFFFF0, Phase::GENERATE, 1, 2, 30, 0, -1, 0, false});
  });
  expect_every_loader_rejects(dir, "STEP_BEGIN of step 4294967280 where step 1 was expected");
}

// A MODEL_FILE read of 2^40 bytes from a 1 MiB model: analyze made a page access per 4 KiB of it (gigabytes).
TEST(AnalysisRunChecks, ModelFileReadPastTheFile) {
  std::string dir = crafted_run("long-read", 1 << 20, [](trace::TraceWriter& w, const uint32_t* ids) {
    w.op(file_reading_op(0, {{0, 4096}, {4096, uint64_t{1} << 40}}), ids, kShare);
  });
  expect_every_loader_rejects(dir,
                              "reads 1099511627776 MODEL_FILE bytes at offset 4096, past the end of the "
                              "1048576-byte model file");
  // Wrapping around 2^64 is past the end too.
  dir = crafted_run("wrapping-read", 1 << 20, [](trace::TraceWriter& w, const uint32_t* ids) {
    w.op(file_reading_op(0, {{16, UINT64_MAX - 8}}), ids, kShare);
  });
  expect_every_loader_rejects(dir, "past the end of the 1048576-byte model file");
  // Without memory-map.json nothing bounds the reads: an error, not a guess.
  dir = crafted_run("no-map", std::nullopt, [](trace::TraceWriter& w, const uint32_t* ids) {
    w.op(file_reading_op(0, {{0, 4096}}), ids, kShare);
  });
  expect_every_loader_rejects(dir, "reads model-file bytes, but no memory-map.json gives the file's size");
}

// Page sizes are range-checked (2^64 - 1 would loop forever doubling the miss-ratio curve's capacity), and jumps
// between reads past 2^63 are measured without a signed overflow (a forward jump there must not count backward).
TEST(AnalysisRunChecks, PageSizeAndJumpsPast2To63) {
  const uint64_t far = (uint64_t{1} << 63) + 100;
  const std::string dir = crafted_run("far-read", UINT64_MAX, [&](trace::TraceWriter& w, const uint32_t* ids) {
    w.op(file_reading_op(0, {{0, 1}, {far, 8}}), ids, kShare);
  });
  const RunData run = load_run(dir);
  AnalyzeOptions opt;
  opt.measure_bandwidth = false;
  for (uint64_t page : {uint64_t{0}, kMaxPageBytes + 1, UINT64_MAX}) {
    opt.page_bytes = page;
    try {
      analyze_run(run, opt);
      ADD_FAILURE() << "page size " << page << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("page size {} is outside 1 to 1073741824 bytes", page)),
                std::string::npos)
          << e.what();
    }
  }
  opt.page_bytes = kMaxPageBytes;
  const nlohmann::json r = analyze_run(run, opt);
  const nlohmann::json& order = r["order"]["run"];
  EXPECT_EQ(order["backward_moves"], 0);
  EXPECT_EQ(order["forward_fraction"], 1.0);
  EXPECT_EQ(order["jump_histogram"][">=16M"], 1);
}

// A copy of a real run directory whose file `name` is rewritten by `edit` (its JSON parsed, changed, written back).
std::string edited_run(const std::string& from, const std::string& tag, const std::string& name,
                       const std::function<void(nlohmann::json&)>& edit) {
  const std::string dir = ::testing::TempDir() + "tt-edited-" + tag;
  std::filesystem::remove_all(dir);
  std::filesystem::copy(from, dir, std::filesystem::copy_options::recursive);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(dir + "/" + name));
  edit(j);
  std::ofstream(dir + "/" + name, std::ios::trunc) << j.dump();
  return dir;
}

// Bytes of a runtime buffer past its size in buffers.json (issue 36 item 7), and fields of the wrong type in
// memory-map.json and buffers.json: refused by the loader with the file and the field named (not a bare JSON
// exception, nor a read past the buffer).
TEST(AnalysisRunChecks, BufferRangesAndFieldTypesChecked) {
  const std::string real = make_run(test::repo_path("models/stories260K.gguf"), "checks", 1, 2);
  // The KV cache of layer 0 (buffer 3) made one byte smaller than what the trace reads of it.
  std::string dir = edited_run(real, "small-kv", "buffers.json", [](nlohmann::json& b) {
    for (nlohmann::json& e : b["events"])
      if (e[4] == 3) e[6] = 1;
  });
  expect_every_loader_rejects(dir, "past its 1 bytes in buffers.json");
  dir =
      edited_run(real, "mm-type", "memory-map.json", [](nlohmann::json& m) { m["tensors"][2]["size_bytes"] = "big"; });
  expect_every_loader_rejects(dir, "memory-map.json': field 'tensors[2].size_bytes' is \"big\", expected an integer");
  dir = edited_run(real, "file-size-type", "memory-map.json", [](nlohmann::json& m) { m["file_size"] = -1; });
  expect_every_loader_rejects(dir, "memory-map.json': field 'file_size' is -1, expected an integer in [0, ");
  dir = edited_run(real, "event-type", "buffers.json", [](nlohmann::json& b) { b["events"][0][6] = 1.5; });
  expect_every_loader_rejects(dir, "buffers.json': field 'events[0][6]' is 1.5, expected an integer");
  dir =
      edited_run(real, "step-type", "buffers.json", [](nlohmann::json& b) { b["steps"][0]["arena_bytes"] = nullptr; });
  expect_every_loader_rejects(dir, "buffers.json': field 'steps[0].arena_bytes' is null, expected an integer");
}

// What a buffer is comes from the loader as a typed field: the KV cache layers, the arena and its growth events.
TEST(AnalysisRunChecks, BufferKindsAreTyped) {
  const std::string dir = make_run(test::repo_path("models/stories260K.gguf"), "kinds", 1, 2);
  const RunData run = load_run(dir);
  int k = 0, v = 0, arena = 0, inputs = 0;
  for (const RunBuffer& b : run.buffers) {
    if (b.kind == BufferKind::K_CACHE) {
      EXPECT_EQ(b.id, 3 + 2 * b.layer);
      ++k;
    }
    if (b.kind == BufferKind::V_CACHE) {
      EXPECT_EQ(b.id, 4 + 2 * b.layer);
      ++v;
    }
    arena += b.kind == BufferKind::ACTIVATION_ARENA;
    inputs += b.kind == BufferKind::INPUTS;
    EXPECT_GT(b.size, 0u) << b.name;
  }
  EXPECT_EQ(k, 5);
  EXPECT_EQ(v, 5);
  EXPECT_EQ(arena, 1);
  EXPECT_EQ(inputs, 1);  // not in buffers.json: known from the trace
  int growth = 0;
  for (const BufferEvent& e : run.buffer_events)
    if (e.growth) {
      EXPECT_EQ(e.grown, "activations");
      ++growth;
    }
  EXPECT_GT(growth, 0);
}

// The viewer's summary and `analyze --json` give the same per-step, per-layer, per-op-kind and per-tensor figures
// (they were computed twice, with views counted in the viewer only and tensor reads counted per input, not per range).
TEST(AnalysisRun, ViewerSummaryAgreesWithAnalyze) {
  const std::string dir = make_run(test::repo_path("models/stories260K.gguf"), "agree", 2, 4);
  const nlohmann::json a = analyze_run(load_run(dir), no_bandwidth());
  const serve::Api api({dir});
  const serve::Response resp = api.handle("/api/runs/0/summary", {});
  ASSERT_EQ(resp.status, 200) << resp.body;
  const nlohmann::json v = nlohmann::json::parse(resp.body);

  std::map<nlohmann::json, uint64_t> layer_ns;
  for (const auto& l : a["sources"]["layers"])
    layer_ns[l["layer"].get<int>() >= 0 ? l["layer"] : nlohmann::json()] = l["op_ns"];
  ASSERT_EQ(v["layers"].size(), layer_ns.size());
  for (const auto& l : v["layers"]) EXPECT_EQ(l["ns"], layer_ns[l["layer"]]) << l.dump();

  std::map<std::string, std::pair<uint64_t, uint64_t>> kinds;  // op -> ops, op_ns
  for (const auto& k : a["sources"]["op_kinds"]) kinds[k["op"]] = {k["ops"], k["op_ns"]};
  ASSERT_EQ(v["op_kinds"].size(), kinds.size());
  for (const auto& k : v["op_kinds"]) {
    EXPECT_EQ(k["count"], kinds[k["op"]].first) << k.dump();
    EXPECT_EQ(k["ns"], kinds[k["op"]].second) << k.dump();
  }

  std::map<std::string, std::pair<uint64_t, uint64_t>> tensors;  // reads, bytes
  for (const auto& t : a["hot_cold"]["tensors"]) tensors[t["tensor"]] = {t["reads"], t["bytes_read"]};
  ASSERT_FALSE(v["hottest_tensors"].empty());
  for (const auto& t : v["hottest_tensors"]) {
    ASSERT_TRUE(tensors.count(t["name"])) << t.dump();
    EXPECT_EQ(t["reads"], tensors[t["name"]].first) << t.dump();
    EXPECT_EQ(t["bytes"], tensors[t["name"]].second) << t.dump();
  }
  EXPECT_EQ(v["hottest_tensors"][0]["bytes"], a["hot_cold"]["tensors"][0]["bytes_read"]);

  ASSERT_EQ(v["steps"].size(), a["sources"]["steps"].size());
  for (size_t s = 0; s < v["steps"].size(); ++s) {
    const auto &x = v["steps"][s], &y = a["sources"]["steps"][s];
    EXPECT_EQ(x["ops"], y["ops"]) << s;
    EXPECT_EQ(x["op_ns"], y["op_ns"]) << s;
    EXPECT_EQ(x["file_bytes"], y["MODEL_FILE"]["bytes"]) << s;
    EXPECT_EQ(x["file_bytes"].get<uint64_t>() + x["buffer_bytes"].get<uint64_t>(), y["total_bytes"]) << s;
  }
  EXPECT_EQ(v["thread_time"], a["thread_time"]);
}

// A span on thread 65535: the thread count (65536) wrapped to 0 in 16 bits and the thread's time was lost.
TEST(AnalysisThreadTime, HighestThreadNumberCounted) {
  trace::TraceContents t;
  trace::StepMarker m;
  m.step = 0, m.phase = Phase::GENERATE, m.start_ns = 0, m.end_ns = 1000, m.ended = true;
  t.steps.push_back(m);
  t.spans.push_back({0, 0, 65535, 100, 600});
  const nlohmann::json r = thread_time(t);
  const nlohmann::json& threads = r["phases"]["GENERATE"]["threads"];
  ASSERT_EQ(threads.size(), 65536u);
  EXPECT_EQ(threads[65535]["busy_ns_total"], 500u);
  EXPECT_EQ(threads[0]["busy_ns_total"], 0u);
}

TEST(AnalysisTrace, IoRecordRoundTripAndVersion1Refused) {
  const std::string path = ::testing::TempDir() + "tt-io-trace.bin";
  {
    trace::TraceWriter w(path);
    w.step_begin({0, Phase::PROMPT, 0, 3, 10, 0, -1, 0, false});
    trace::IoRecord io;
    io.step = 0;
    io.node = 7;
    io.ranges = {{4096, 8192, 2, 1}, {65536, 100, 1, 0}};
    io.workers = {{0, 3, 5, 12288}, {1, 0, 2, 0}};
    w.io(io);
    w.step_end({0, Phase::PROMPT, 0, 3, 10, 20, 5, 1.0f, true});
  }
  trace::TraceContents t = trace::read_trace(path);
  EXPECT_EQ(t.version, trace::kVersion);
  ASSERT_EQ(t.io.size(), 1u);
  EXPECT_EQ(t.io[0].node, 7u);
  EXPECT_EQ(t.io[0].pages, 3u);
  EXPECT_EQ(t.io[0].nonresident_pages, 1u);
  ASSERT_EQ(t.io[0].workers.size(), 2u);
  EXPECT_EQ(t.io[0].workers[0].major_faults, 3u);
  EXPECT_EQ(t.io[0].workers[0].read_bytes, 12288u);
  EXPECT_EQ(t.io[0].ranges[1].offset, 65536u);

  // A version-1 file (from before IO records) is refused by name: its op records were encoded otherwise.
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const uint32_t v1 = 1;
  bytes.replace(8, 4, reinterpret_cast<const char*>(&v1), 4);
  const std::string old_path = ::testing::TempDir() + "tt-v1-trace.bin";
  std::ofstream(old_path, std::ios::binary) << bytes;
  try {
    trace::read_trace(old_path);
    ADD_FAILURE() << "a version-1 trace was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("trace format version 1 was written by an older tensortrace"),
              std::string::npos)
        << e.what();
  }
}

TEST(DiffRuns, QuantizationsReportFirstDivergentOp) {
  TT_REQUIRE_SHARED();
  const std::string a = make_run(test::shared_path("models/synth-mini-256.Q8_0.gguf"), "q8", 2, 4);
  const std::string b = make_run(test::shared_path("models/synth-mini-256.Q4_0.gguf"), "q4", 2, 4);
  const RunData ra = load_run(a), rb = load_run(b);
  const nlohmann::json d = diff_runs(ra, rb, {});
  EXPECT_EQ(d["alignment"]["only_in_a"], 0);
  EXPECT_EQ(d["alignment"]["only_in_b"], 0);
  ASSERT_TRUE(d["values"]["available"].get<bool>());
  const auto& first = d["values"]["first_divergent_op"];
  ASSERT_FALSE(first.is_null());
  // The first op reading a quantized weight differs at once: the embedding lookup of the prompt.
  EXPECT_EQ(first["step"], 0);
  EXPECT_EQ(first["node_a"], 0);
  EXPECT_EQ(first["name"], "embd");
  EXPECT_NE(first["a"]["hash"], first["b"]["hash"]);
  // Q4_0 weights are smaller: the matrix products read fewer file bytes.
  EXPECT_GT(d["bytes"]["ops_with_different_bytes"].get<uint64_t>(), 0u);
  for (const auto& k : d["time"]["op_kinds"])
    if (k["name"] == "MUL_MAT") {
      EXPECT_LT(k["b_bytes"].get<uint64_t>(), k["a_bytes"].get<uint64_t>());
    }
  // A loose tolerance accepts the small embedding difference and moves the first divergence later (or away).
  const nlohmann::json loose = diff_runs(ra, rb, {.tolerance = 0.05});
  if (!loose["values"]["first_divergent_op"].is_null()) {
    const auto& f = loose["values"]["first_divergent_op"];
    EXPECT_TRUE(f["step"].get<int>() > 0 || f["node_a"].get<int>() > 0) << f.dump();
  }
  EXPECT_NE(render_diff_text(d).find("first: step 0 node 0 GET_ROWS 'embd'"), std::string::npos);
}

TEST(DiffRuns, ThreadCountsSameOutputsDifferentTimes) {
  TT_REQUIRE_SHARED();
  const std::string a = make_run(test::shared_path("models/synth-mini-256.Q4_0.gguf"), "t1", 1, 4);
  const std::string b = make_run(test::shared_path("models/synth-mini-256.Q4_0.gguf"), "t2", 2, 4);
  const nlohmann::json d = diff_runs(load_run(a), load_run(b), {});
  EXPECT_TRUE(d["tokens"]["first_differing_step"].is_null());
  EXPECT_EQ(d["tokens"]["differing_steps"], 0);
  EXPECT_TRUE(d["values"]["available"].get<bool>());
  EXPECT_GT(d["values"]["ops_compared"].get<uint64_t>(), 0u);
  EXPECT_TRUE(d["values"]["first_divergent_op"].is_null()) << d["values"]["first_divergent_op"].dump();
  EXPECT_EQ(d["bytes"]["ops_with_different_bytes"], 0);
  EXPECT_EQ(d["a"]["threads"], 1);
  EXPECT_EQ(d["b"]["threads"], 2);
  // Times are measured separately: they are not all equal.
  EXPECT_NE(d["time"]["a_op_ns"], d["time"]["b_op_ns"]);
  EXPECT_FALSE(d["time"]["largest_differences"].empty());
}

TEST(DiffRuns, SeedsAtTemperatureChangeTokens) {
  const std::string model = test::repo_path("models/stories260K.gguf");
  const std::string a = make_run(model, "seed1", 1, 16, 1.0f, 1);
  const std::string b = make_run(model, "seed2", 1, 16, 1.0f, 2);
  const nlohmann::json d = diff_runs(load_run(a), load_run(b), {});
  EXPECT_GT(d["tokens"]["differing_steps"].get<int>(), 0);
  ASSERT_FALSE(d["tokens"]["first_differing_step"].is_null());
  // Step 0's logits are the same (same prompt); the first sampled token can differ, but every op of step 0 agrees.
  if (!d["values"]["first_divergent_op"].is_null()) {
    EXPECT_GT(d["values"]["first_divergent_op"]["step"], 0);
  }
  EXPECT_NE(render_diff_text(d).find("chose different tokens"), std::string::npos);
}

TEST(DiffRuns, SaysWhenValuesAreMissing) {
  const std::string model = test::repo_path("models/stories260K.gguf");
  const std::string a = make_run(model, "novalues", 1, 2, 0, 1, /*values=*/false);
  const std::string b = make_run(model, "values", 1, 2, 0, 1, /*values=*/true);
  const nlohmann::json d = diff_runs(load_run(a), load_run(b), {});
  EXPECT_FALSE(d["values"]["available"].get<bool>());
  EXPECT_NE(d["values"]["note"].get<std::string>().find("--trace-values"), std::string::npos);
  EXPECT_NE(render_diff_text(d).find("need --trace-values in both runs (A: no, B: yes)"), std::string::npos);
}

TEST(AnalysisIoTrace, ColdRunFaultsOnFirstReadsOnly) {
  TT_REQUIRE_SHARED();
  const std::string dir = ::testing::TempDir() + "tt-analysis-cold";
  std::filesystem::remove_all(dir);
  ExperimentOptions o;
  o.model_path = test::shared_path("models/synth-llama-512.Q4_K_M.gguf");
  o.prompt = "Once upon a time";
  o.n_predict = 3;
  o.n_threads = 2;
  o.run_dir = dir;
  o.trace_options.io = true;
  o.cold = true;
  o.progress = false;
  const ExperimentResult res = run_experiment(o, nullptr);
  const nlohmann::json& check = res.run_json["options"]["cold_check"];
  if (!check.value("evicted", false))
    GTEST_SKIP() << "the sandbox did not let the model file leave the page cache: " << check.dump();

  const RunData run = load_run(dir);
  ASSERT_FALSE(run.trace.io.empty());
  const uint64_t ps = run.trace.io.front().page_bytes;
  std::set<uint64_t> touched;  // pages read by earlier ops
  uint64_t step0_cold = 0;
  std::map<std::pair<uint32_t, uint32_t>, std::string> names;
  for (const auto& op : run.trace.ops) names[{op.step, op.node}] = op.name;
  for (const trace::IoRecord& io : run.trace.io) {
    uint64_t faults = 0;
    for (const auto& w : io.workers) faults += w.major_faults;
    const std::string& name = names[{io.step, io.node}];
    for (const trace::IoRange& r : io.ranges) {
      bool new_pages = false;
      for (uint64_t p = r.offset / ps; p <= (r.offset + r.length - 1) / ps; ++p) new_pages |= touched.insert(p).second;
      // Pages missing from the page cache are only ever seen on a first read of them.
      if (r.nonresident_pages > 0) {
        EXPECT_TRUE(new_pages) << "step " << io.step << " " << name;
      }
    }
    if (io.step == 0) step0_cold += io.nonresident_pages + faults;
    // Later steps read weights already read in step 0 (embedding rows of new tokens are the exception).
    if (io.step >= 1 && name != "embd") {
      EXPECT_EQ(io.nonresident_pages, 0u) << "step " << io.step << " " << name;
      EXPECT_EQ(faults, 0u) << "step " << io.step << " " << name;
    }
  }
  EXPECT_GT(step0_cold, 0u) << "a cold run shows no non-resident pages or major faults in its first step";
  const nlohmann::json r = analyze_run(run, no_bandwidth());
  ASSERT_TRUE(r.contains("io"));
  EXPECT_EQ(r["io"]["steps"][1]["nonresident_pages"], 0);
}

}  // namespace
}  // namespace tt::analysis

namespace tt::analysis {
namespace {

TEST(SampleStats, SummaryOfASample) {
  const std::vector<double> v = {4, 1, 3, 2};
  const SampleSummary s = summarize(v);
  EXPECT_EQ(s.n, 4u);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.median, 2.5);                // even count: the middle two's mean
  EXPECT_DOUBLE_EQ(s.std, std::sqrt(5.0 / 3.0));  // sum of squares 5 over n - 1
  EXPECT_DOUBLE_EQ(summarize(std::vector<double>{7, 1, 5}).median, 5);
  EXPECT_EQ(summarize(std::vector<double>{}).n, 0u);
  EXPECT_EQ(summarize(std::vector<double>{3}).std, 0);
}

TEST(SampleStats, RoofShareTakesEachRepetitionAgainstItsOwnProbe) {
  // 10, 20, 15 tokens/s of 1 GB against probes of 20, 25, 30 GB/s: shares 0.5, 0.8, 0.5.
  const std::vector<double> tps{10, 20, 15}, roofs{20e9, 25e9, 30e9};
  const analysis::RoofShare r = analysis::roof_share(tps, roofs, 1'000'000'000);
  EXPECT_DOUBLE_EQ(r.reads_median, 15e9);
  EXPECT_DOUBLE_EQ(r.share_median, 0.5);
  EXPECT_DOUBLE_EQ(r.share_low, 0.5);
  EXPECT_DOUBLE_EQ(r.share_high, 0.8);
  EXPECT_DOUBLE_EQ(r.roof_median, 25e9);
  EXPECT_DOUBLE_EQ(r.roof_low, 20e9);
  EXPECT_DOUBLE_EQ(r.roof_high, 30e9);
  // Against the probes' median alone the share would read 0.6: the pairing is what the figure means.
  EXPECT_THROW(analysis::roof_share(tps, std::vector<double>{20e9}, 1), Error);
  EXPECT_THROW(analysis::roof_share(std::vector<double>{}, std::vector<double>{}, 1), Error);
}

TEST(SampleStats, WeightsStreamBeyondTheLastLevelCache) {
  EXPECT_TRUE(analysis::streams_from_memory(33 << 20, 32 << 20));
  EXPECT_FALSE(analysis::streams_from_memory(32 << 20, 32 << 20));
  EXPECT_FALSE(analysis::streams_from_memory(1 << 20, 32 << 20));
  EXPECT_TRUE(analysis::streams_from_memory(1 << 20, 0));  // unknown cache: the roof applies
  EXPECT_GE(analysis::last_level_cache_bytes(), 0);
}

// The sign test's interval, checked against binomial tables: n = 20 at 95% is [x_(6), x_(15)] with coverage
// 1 - 2 P(X <= 5) = 0.9586; n = 10 is [x_(2), x_(9)], 0.9785; below n = 6 no pair of order statistics reaches 95%.
TEST(SampleStats, MedianIntervalFromOrderStatistics) {
  std::vector<double> twenty;
  for (int i = 20; i >= 1; --i) twenty.push_back(i);  // unsorted on purpose
  const MedianInterval a = median_interval(twenty);
  EXPECT_EQ(a.low, 6);
  EXPECT_EQ(a.high, 15);
  EXPECT_NEAR(a.coverage, 0.958611, 1e-6);

  std::vector<double> ten;
  for (int i = 1; i <= 10; ++i) ten.push_back(10 * i);
  const MedianInterval b = median_interval(ten);
  EXPECT_EQ(b.low, 20);
  EXPECT_EQ(b.high, 90);
  EXPECT_NEAR(b.coverage, 0.978516, 1e-6);

  const MedianInterval c = median_interval(std::vector<double>{5, 1, 3, 2, 4});
  EXPECT_EQ(c.low, 1);
  EXPECT_EQ(c.high, 5);
  EXPECT_DOUBLE_EQ(c.coverage, 1 - 2.0 / 32);  // 1 - 2^(1 - n)

  // A lower confidence narrows it; thousands of values do not underflow the binomial terms.
  EXPECT_EQ(median_interval(twenty, 0.5).low, 8);  // P(X <= 7) = 0.1316; P(X <= 8) = 0.2517 is past 0.25
  std::vector<double> many;
  for (int i = 0; i < 5000; ++i) many.push_back(i);
  const MedianInterval d = median_interval(many);
  EXPECT_GT(d.low, 2400);
  EXPECT_LT(d.high, 2600);
  EXPECT_GE(d.coverage, 0.95);
  EXPECT_LT(d.coverage, 0.96);

  EXPECT_EQ(median_interval(std::vector<double>{}).coverage, 0);
  EXPECT_THROW(median_interval(twenty, 1.0), Error);
  EXPECT_THROW(median_interval(twenty, 0), Error);
}

TEST(SampleStats, VerdictAgainstAThreshold) {
  EXPECT_EQ(compare_median({0.97, 0.99, 0.95}, 0.97), Verdict::kAbove);
  EXPECT_EQ(compare_median({0.91, 0.969, 0.95}, 0.97), Verdict::kBelow);
  EXPECT_EQ(compare_median({0.95, 0.98, 0.95}, 0.97), Verdict::kUndecided);
  EXPECT_STREQ(verdict_name(Verdict::kAbove), "met");
  EXPECT_STREQ(verdict_name(Verdict::kBelow), "not met");
  EXPECT_STREQ(verdict_name(Verdict::kUndecided), "undecided");
  // A bound the median must stay below (tracing's added microseconds).
  EXPECT_STREQ(verdict_name(Verdict::kBelow, true), "met");
  EXPECT_STREQ(verdict_name(Verdict::kAbove, true), "not met");
  EXPECT_STREQ(verdict_name(Verdict::kUndecided, true), "undecided");
}

}  // namespace
}  // namespace tt::analysis
