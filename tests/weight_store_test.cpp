// `run --weight-budget`: the weight store serves the weights from storage through a cache of a fixed size. The
// numbers must not change (logits bit for bit), the hits must be the replay's of the same accesses, the resident set
// stays within the budget, and bad budgets and failed reads stop the run with what was wrong.
#include "model/weight_store.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "analysis/weight_cache.h"
#include "cache/policy_cache.h"
#include "core/error.h"
#include "model/engine.h"
#include "support/paths.h"
#include "tokenizer/tokenizer.h"
#include "trace/trace_file.h"

namespace tt {
namespace {

WeightStoreOptions opts(const std::string& budget, cache::Policy policy,
                        WeightStoreOptions::Prefetch prefetch = WeightStoreOptions::Prefetch::NONE) {
  WeightStoreOptions o;
  o.budget = budget;
  o.policy = policy;
  o.prefetch = prefetch;
  return o;
}

// The logits of the prompt step and of n greedy steps after it (moe_predict: the engine predicts next layers'
// experts, which next-layer prefetch needs on a mixture-of-experts model).
// Long enough that each layer of the prompt step computes for a while: the prefetcher thread (NEXT_LAYER) then
// reads the next layer's units ahead of demand even on a machine where the compute threads are quick (AMX tiles made
// TinyLLama-v0's prompt of 5 tokens too short for the prefetcher to win a unit now and then).
constexpr const char* kPrompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. "
    "One day, she saw a big red ball under a tall tree. She ran to the tree and picked up the ball. Then she threw "
    "the ball to her friend Tom, and they laughed and played together until the sun went down.";

std::vector<std::vector<float>> greedy_logits(const Model& model, WeightStore* store, int n, int threads = 2,
                                              bool moe_predict = false) {
  EngineOptions eo{0, threads};
  eo.moe_predict = moe_predict;
  Engine engine(model, eo);
  if (store) engine.set_residency(store);
  std::vector<int32_t> tokens = model.tokenizer->encode(kPrompt, true);
  std::vector<std::vector<float>> out;
  std::span<const float> logits = engine.eval(tokens);
  for (int i = 0;; ++i) {
    out.emplace_back(logits.begin(), logits.end());
    if (i == n) break;
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    logits = engine.eval(std::span(&next, 1));
  }
  return out;
}

// With prefetch, `prefetch_reads` says whether the prefetcher must have read units ahead of demand and had them hit:
// on stories260K, whose layers compute in microseconds, whether its thread wins any unit from demand is a race
// (it loses most runs on 2 vCPUs); TinyLLama-v0's layers give it time.
void expect_same_logits(const std::string& path, const std::string& budget, cache::Policy policy,
                        WeightStoreOptions::Prefetch prefetch = WeightStoreOptions::Prefetch::NONE,
                        bool prefetch_reads = true) {
  const auto plain = greedy_logits(*load_model(path), nullptr, 6);
  auto model = load_model(path, FileResidency::MAPPED);
  WeightStore store(*model, opts(budget, policy, prefetch));
  const bool moe = model->config.n_expert > 0 && prefetch == WeightStoreOptions::Prefetch::NEXT_LAYER;
  const auto budgeted = greedy_logits(*model, &store, 6, 2, moe);
  store.finish();
  ASSERT_EQ(plain.size(), budgeted.size());
  for (size_t s = 0; s < plain.size(); ++s)
    EXPECT_EQ(std::memcmp(plain[s].data(), budgeted[s].data(), plain[s].size() * sizeof(float)), 0)
        << path << " step " << s << " under " << cache::policy_name(policy) << " " << budget;
  EXPECT_GT(store.totals().misses + store.totals().prefetches, 0u) << path;
  if (prefetch != WeightStoreOptions::Prefetch::NONE && prefetch_reads) {
    EXPECT_GT(store.totals().prefetches, 0u) << path;
    EXPECT_GT(store.totals().prefetch_hits, 0u) << path;
  }
}

TEST(WeightStore, DenseLogitsBitIdenticalUnderHalfBudget) {
  for (cache::Policy p : {cache::Policy::LRU, cache::Policy::LFU, cache::Policy::LEAST_STALE})
    expect_same_logits(test::repo_path("models/stories260K.gguf"), "50%", p);
  {
    // Half the weights of a dense model, whose every step reads them all: units come and go.
    auto model = load_model(test::repo_path("models/stories260K.gguf"), FileResidency::MAPPED);
    WeightStore store(*model, opts("50%", cache::Policy::LRU));
    greedy_logits(*model, &store, 3);
    EXPECT_GT(store.totals().misses, store.units().size());
    EXPECT_GT(store.totals().evictions, 0u);
  }
  expect_same_logits(test::repo_path("models/TinyLLama-v0.Q4_0.gguf"), "50%", cache::Policy::LRU);
}

TEST(WeightStore, MoeLogitsBitIdenticalUnderHalfBudget) {
  TT_REQUIRE_SHARED();
  const std::string path = test::shared_path("models/synth-qwen3moe-256.Q4_K_M.gguf");
  expect_same_logits(path, "50%", cache::Policy::LRU);
  // Expert tensors are laid out a slab per expert, page-aligned.
  auto model = load_model(path, FileResidency::MAPPED);
  WeightStore store(*model, opts("50%", cache::Policy::LRU));
  const Tensor& w = *model->weights.layers[0].ffn_up_exps;
  EXPECT_EQ(w.expert_stride % 4096, 0u);
  EXPECT_GE(w.expert_stride, w.row_size() * static_cast<uint64_t>(w.ne[1]));
  EXPECT_GE(store.find_unit(w.name, static_cast<int32_t>(w.ne[2] - 1)), 0);
}

// The hits the run measured are the replay's of its own accesses through the same policy and capacity.
TEST(WeightStore, MeasuredHitsEqualTheReplay) {
  for (cache::Policy p : {cache::Policy::LRU, cache::Policy::LFU, cache::Policy::FIFO, cache::Policy::LEAST_STALE}) {
    uint64_t all_hits = 0;  // a cyclic stream under LRU hits nothing below the whole: some budgets must hit
    for (const char* budget : {"40%", "70%", "100%"}) {
      auto model = load_model(test::repo_path("models/stories260K.gguf"), FileResidency::MAPPED);
      WeightStore store(*model, opts(budget, p));
      store.keep_accesses();
      greedy_logits(*model, &store, 8);
      std::vector<WeightAccess> acc;
      store.take_accesses(acc);
      ASSERT_EQ(acc.size(), store.totals().accesses);
      std::vector<cache::Access> stream;
      std::vector<uint64_t> group;
      uint32_t step = 0;
      for (size_t i = 0; i < acc.size(); ++i) {
        const WeightStore::Unit& u = store.units()[acc[i].unit];
        if (i > 0 && acc[i].node < acc[i - 1].node) ++step;  // node indexes start again at a new step
        stream.push_back({acc[i].unit, u.region_bytes, u.phase, false});
        group.push_back(static_cast<uint64_t>(step) << 32 | acc[i].node);
      }
      cache::PolicyCache sim(p, store.budget(), store.n_phases());
      const std::vector<bool> hits = cache::replay_pinned(sim, stream, group);
      uint64_t n_hits = 0;
      for (size_t i = 0; i < acc.size(); ++i) {
        EXPECT_EQ(hits[i], acc[i].hit) << cache::policy_name(p) << " " << budget << " access " << i;
        n_hits += hits[i];
      }
      EXPECT_EQ(n_hits, store.totals().hits) << cache::policy_name(p) << " " << budget;
      all_hits += n_hits;
    }
    EXPECT_GT(all_hits, 0u) << cache::policy_name(p);
  }
}

TEST(WeightStore, ResidentSetWithinBudget) {
  auto model = load_model(test::repo_path("models/TinyLLama-v0.Q4_0.gguf"), FileResidency::MAPPED);
  WeightStore store(*model, opts("60%", cache::Policy::LRU));
  Engine engine(*model, {0, 2});
  engine.set_residency(&store);
  std::vector<int32_t> tokens = model->tokenizer->encode("Once upon a time", true);
  engine.eval(tokens);
  for (int i = 0; i < 4; ++i) {
    // The kernel's count of the region's pages (mincore), not the cache's bookkeeping.
    EXPECT_LE(store.measured_resident_bytes(), store.budget()) << "step " << i;
    EXPECT_GT(store.measured_resident_bytes(), 0u);
    const int32_t t = 1;
    engine.eval(std::span(&t, 1));
  }
  EXPECT_LE(store.totals().peak_resident_bytes, store.budget());
}

TEST(WeightStore, PrefetchKeepsDenseLogitsBitIdentical) {
  for (cache::Policy p : {cache::Policy::LRU, cache::Policy::LEAST_STALE})
    for (const char* budget : {"50%", "100%"})
      expect_same_logits(test::repo_path("models/stories260K.gguf"), budget, p,
                         WeightStoreOptions::Prefetch::NEXT_LAYER, false);
  expect_same_logits(test::repo_path("models/TinyLLama-v0.Q4_0.gguf"), "60%", cache::Policy::LRU,
                     WeightStoreOptions::Prefetch::NEXT_LAYER);
}

TEST(WeightStore, PrefetchKeepsMoeLogitsBitIdentical) {
  TT_REQUIRE_SHARED();
  const std::string path = test::shared_path("models/synth-qwen3moe-256.Q4_K_M.gguf");
  expect_same_logits(path, "50%", cache::Policy::LRU, WeightStoreOptions::Prefetch::NEXT_LAYER);
  expect_same_logits(path, "100%", cache::Policy::LRU, WeightStoreOptions::Prefetch::NEXT_LAYER);
}

// Prefetch reads come in the cache's order, as prefetch accesses, and later demand accesses find their units.
TEST(WeightStore, PrefetchedUnitsAreHitByLaterDemand) {
  auto model = load_model(test::repo_path("models/TinyLLama-v0.Q4_0.gguf"), FileResidency::MAPPED);
  WeightStore store(*model, opts("100%", cache::Policy::LRU, WeightStoreOptions::Prefetch::NEXT_LAYER));
  store.keep_accesses();
  greedy_logits(*model, &store, 4);
  store.finish();
  std::vector<WeightAccess> acc;
  store.take_accesses(acc);
  std::vector<int> state(store.units().size(), 0);  // 1: prefetched, not yet used
  uint64_t prefetches = 0, hits_on_prefetched = 0, demand = 0;
  for (const WeightAccess& a : acc) {
    if (a.prefetch) {
      EXPECT_FALSE(a.hit);
      EXPECT_GE(a.end_ns, a.start_ns);
      EXPECT_EQ(state[a.unit], 0) << "unit " << a.unit << " prefetched while resident";
      state[a.unit] = 1, ++prefetches;
      continue;
    }
    ++demand;
    if (state[a.unit] == 1) {
      EXPECT_TRUE(a.hit) << "a prefetched unit missed (its 100% budget evicts nothing)";
      EXPECT_TRUE(a.prefetch_hit);
      ++hits_on_prefetched;
    }
    state[a.unit] = 2;
  }
  EXPECT_EQ(demand, store.totals().accesses);
  EXPECT_EQ(prefetches, store.totals().prefetches);
  EXPECT_GT(prefetches, 0u);
  EXPECT_EQ(hits_on_prefetched, store.totals().prefetch_hits);
  EXPECT_GT(hits_on_prefetched, prefetches / 2);
}

TEST(WeightStore, ResidentSetWithinBudgetWithPrefetch) {
  for (const char* budget : {"45%", "60%"}) {
    auto model = load_model(test::repo_path("models/TinyLLama-v0.Q4_0.gguf"), FileResidency::MAPPED);
    WeightStore store(*model, opts(budget, cache::Policy::LRU, WeightStoreOptions::Prefetch::NEXT_LAYER));
    Engine engine(*model, {0, 2});
    engine.set_residency(&store);
    std::vector<int32_t> tokens = model->tokenizer->encode(kPrompt, true);
    engine.eval(tokens);
    for (int i = 0; i < 6; ++i) {
      // The prefetcher may be reading now: the kernel's count of the region's pages stays within the budget.
      for (int k = 0; k < 20; ++k)
        EXPECT_LE(store.measured_resident_bytes(), store.budget()) << budget << " step " << i;
      const int32_t t = 1;
      engine.eval(std::span(&t, 1));
    }
    store.finish();
    EXPECT_GT(store.totals().prefetches, 0u) << budget;
    EXPECT_LE(store.totals().peak_resident_bytes, store.budget()) << budget;
    EXPECT_LE(store.measured_resident_bytes(), store.budget()) << budget;
  }
}

// The embedding is cut into row groups: a one-token step reads one of them, and the embedding no longer sets the
// smallest budget.
TEST(WeightStore, EmbeddingRowsAreUnits) {
  auto model = load_model(test::repo_path("models/TinyLLama-v0.Q4_0.gguf"), FileResidency::MAPPED);
  ASSERT_FALSE(model->weights.output_tied);
  WeightStore store(*model, opts("100%", cache::Policy::LRU));
  const std::string embd = model->weights.token_embd->name;
  size_t groups = 0;
  for (const WeightStore::Unit& u : store.units())
    if (u.tensor == model->weights.token_embd) {
      ++groups;
      EXPECT_EQ(u.region_offset % store.page_bytes(), 0u);
      EXPECT_EQ(u.bytes % u.tensor->row_size(), 0u);
    }
  EXPECT_GT(groups, 1u);
  store.keep_accesses();
  Engine engine(*model, {0, 2});
  engine.set_residency(&store);
  const int32_t t = 5;
  engine.eval(std::span(&t, 1));
  std::vector<WeightAccess> acc;
  store.take_accesses(acc);
  size_t embd_accesses = 0;
  for (const WeightAccess& a : acc) embd_accesses += store.units()[a.unit].tensor == model->weights.token_embd;
  EXPECT_EQ(embd_accesses, 1u);
  // The smallest budget is set by the output weight, which every step reads whole, not by the embedding.
  WeightStore small(*model, opts("4K", cache::Policy::LRU));
  try {
    small.require(4);
    FAIL() << "a 4 KiB budget was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'output.weight' needs"), std::string::npos) << e.what();
  }
}

// analyze's replays of a prefetch run's stream are simulate_cache's of the same stream, with and without its
// prefetch accesses.
TEST(WeightStore, AnalyzePrefetchReplayIsSimulateCache) {
  RunData run;
  run.dir = "synthetic";
  RunInfo::WeightCache& w = run.info.weight_cache.emplace();  // as load_run reads run.json's weight_cache
  w.policy = "lru", w.budget_bytes = 3 * 4096, w.page_bytes = 4096, w.n_phases = 4, w.prefetch = "next-layer";
  // Units at offsets 0..4 (4 KiB each) over layers: demand accesses with prefetches of the next one between.
  uint32_t node = 0;
  for (uint32_t step = 0; step < 3; ++step)
    for (uint64_t u = 0; u < 5; ++u) {
      trace::WeightLoadRecord d{step,  node++, fmt::format("blk.{}.w", u % 2), -1, u * 4096, 4096, 0, 0, 0,
                                false, false};
      d.hit = step > 0 && u < 2;
      run.trace.weight_loads.push_back(d);
      trace::WeightLoadRecord p = d;
      p.offset = ((u + 1) % 5) * 4096;
      p.prefetch = true, p.hit = false;
      run.trace.weight_loads.push_back(p);
    }
  const auto s = analysis::weight_cache_section(run);
  ASSERT_TRUE(s.has_value());
  const std::vector<cache::Access> stream = analysis::weight_access_stream(run, 4096, 4);
  ASSERT_EQ(stream.size(), run.trace.weight_loads.size());
  std::vector<cache::Access> demand;
  for (const cache::Access& a : stream)
    if (!a.prefetch) demand.push_back(a);
  for (const auto& [got, want] :
       {std::pair{s->replay_prefetch, analysis::simulate_cache(stream, 3 * 4096, cache::Policy::LRU)},
        std::pair{s->replay_demand, analysis::simulate_cache(demand, 3 * 4096, cache::Policy::LRU)}}) {
    EXPECT_EQ(got.accesses, want.accesses);
    EXPECT_EQ(got.hits, want.hits);
    EXPECT_EQ(got.bytes_missed, want.bytes_missed);
    EXPECT_EQ(got.prefetches, want.prefetches);
    EXPECT_EQ(got.useful_prefetches, want.useful_prefetches);
  }
  EXPECT_GT(s->replay_prefetch.useful_prefetches, 0u);
  EXPECT_EQ(s->replay_demand.prefetches, 0u);
  EXPECT_EQ(s->accesses, 15u);
  EXPECT_EQ(s->prefetches, 15u);
  const nlohmann::json j = analysis::weight_cache_json(*s);
  EXPECT_EQ(j["replay_prefetch"]["hits"], s->replay_prefetch.hits);
  EXPECT_EQ(j["replay_no_prefetch"]["hits"], s->replay_demand.hits);
}

TEST(WeightStore, BudgetBelowOneNodeIsRefusedWithTheNumberNeeded) {
  auto model = load_model(test::repo_path("models/stories260K.gguf"), FileResidency::MAPPED);
  WeightStore store(*model, opts("4K", cache::Policy::LRU));
  try {
    store.require(4);
    FAIL() << "a 4 KiB budget was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("give at least"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("4K"), std::string::npos) << e.what();
  }
  for (const char* bad : {"", "abc", "0", "0%", "150%", "-5", "12Q", "%"})
    EXPECT_THROW(WeightStore(*model, opts(bad, cache::Policy::LRU)), Error) << "'" << bad << "'";
}

TEST(WeightStore, TruncatedFileStopsTheRunNamingTheOffset) {
  test::TempDir dir;
  const auto copy = dir.path / "cut.gguf";
  std::filesystem::copy_file(test::repo_path("models/stories260K.gguf"), copy);
  auto model = load_model(copy.string(), FileResidency::MAPPED);
  WeightStore store(*model, opts("50%", cache::Policy::LRU));
  // Cut inside the last unit of the file: its read comes up short.
  const WeightStore::Unit* last = &store.units().front();
  for (const WeightStore::Unit& u : store.units())
    if (u.file_offset > last->file_offset) last = &u;
  std::filesystem::resize_file(copy, last->file_offset + 10);
  try {
    greedy_logits(*model, &store, 2);
    FAIL() << "the run went on past a truncated file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("file offset {}", last->file_offset + 10)), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tt

namespace tt {
namespace {

// WEIGHT_LOAD records round-trip; a record of the wrong length or with unknown flags names the problem.
TEST(WeightStore, WeightLoadRecordsRoundTrip) {
  test::TempDir dir;
  const std::string path = (dir.path / "trace.bin").string();
  trace::WeightLoadRecord a{3, 17, "blk.1.ffn_up_exps.weight", 5, 123456, 4096, 100, 250, 150, false, false};
  trace::WeightLoadRecord b{3, 18, "output.weight", -1, 999, 64, 300, 300, 0, true, false};
  {
    trace::TraceWriter w(path);
    w.weight_load(a, w.intern(a.tensor));
    w.weight_load(b, w.intern(b.tensor));
    w.flush();
  }
  const trace::TraceContents t = trace::read_trace(path);
  ASSERT_EQ(t.weight_loads.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const trace::WeightLoadRecord &x = t.weight_loads[i], &y = i == 0 ? a : b;
    EXPECT_EQ(x.step, y.step);
    EXPECT_EQ(x.node, y.node);
    EXPECT_EQ(x.tensor, y.tensor);
    EXPECT_EQ(x.expert, y.expert);
    EXPECT_EQ(x.offset, y.offset);
    EXPECT_EQ(x.bytes, y.bytes);
    EXPECT_EQ(x.start_ns, y.start_ns);
    EXPECT_EQ(x.end_ns, y.end_ns);
    EXPECT_EQ(x.wait_ns, y.wait_ns);
    EXPECT_EQ(x.hit, y.hit);
  }
  // Flags past hit | prefetch: the last byte of the last record, then the block resealed.
  std::vector<uint8_t> bytes(std::filesystem::file_size(path));
  {
    FILE* f = std::fopen(path.c_str(), "rb");
    ASSERT_EQ(std::fread(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
  }
  bytes.back() = 9;
  trace::reseal_blocks(bytes);
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  try {
    trace::read_trace(path);
    FAIL() << "flags 9 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("WEIGHT_LOAD record with flags 9"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tt
