// Expert prediction (`run --moe-predict`) and what analyze makes of it: the numbers of a run do not change, the
// recorded predictions give the recall analyze reports, the expert-cache replay prefetches by a predictor, and
// several runs pool into one replay.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "analysis/analysis.h"
#include "core/error.h"
#include "model/engine.h"
#include "support/paths.h"
#include "support/tiny_model.h"
#include "trace/trace_file.h"
#include "tracer/experiment.h"

namespace tt {
namespace {

using namespace analysis;
namespace fs = std::filesystem;

// The logits of every step of a greedy run (the prompt, then n generated tokens).
std::vector<std::vector<float>> greedy_logits(const Model& model, bool predict, int n) {
  EngineOptions eo;
  eo.n_ctx = 64;
  eo.n_threads = 2;
  eo.moe_predict = predict;
  Engine engine(model, eo);
  std::vector<int32_t> tokens = {1, 50, 60, 70, 80, 90};
  std::vector<std::vector<float>> out;
  for (int i = 0; i <= n; ++i) {
    const std::span<const float> logits = engine.eval(tokens);
    out.emplace_back(logits.begin(), logits.end());
    tokens = {static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin())};
    // Every routed layer but the first holds the previous layer's prediction of it.
    const auto routing = engine.routing();
    for (size_t l = 0; l < routing.size(); ++l)
      EXPECT_EQ(routing[l].predicted != nullptr, predict && l > 0) << "layer " << routing[l].layer;
    int pred_nodes = 0;
    for (const Node& node : engine.last_step().graph.nodes())
      pred_nodes += node.out->name.rfind("ffn_moe_pred_topk-", 0) == 0;
    EXPECT_EQ(pred_nodes, predict ? static_cast<int>(routing.size()) - 1 : 0);
  }
  return out;
}

void expect_bit_identical(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t s = 0; s < a.size(); ++s) {
    ASSERT_EQ(a[s].size(), b[s].size());
    EXPECT_EQ(std::memcmp(a[s].data(), b[s].data(), a[s].size() * sizeof(float)), 0) << "step " << s;
  }
}

TEST(MoePredict, TinyModelsLogitsUnchanged) {
  for (const char* arch : {"llama", "olmoe", "qwen3moe"}) {
    test::TinyModelSpec spec;
    spec.arch = arch;
    spec.n_expert = 8;
    spec.n_expert_used = 3;
    if (std::string(arch) == "qwen3moe") spec.head_dim = 16;
    const std::string path =
        (fs::temp_directory_path() / fmt::format("tt-predict-{}-{}.gguf", ::getpid(), arch)).string();
    test::write_tiny_model(spec, path);
    auto model = load_model(path);
    SCOPED_TRACE(arch);
    expect_bit_identical(greedy_logits(*model, false, 4), greedy_logits(*model, true, 4));
    fs::remove(path);
  }
}

TEST(MoePredict, DenseModelIsRefused) {
  auto model = load_model(test::repo_path("models/stories260K.gguf"));
  EngineOptions eo;
  eo.moe_predict = true;
  try {
    Engine engine(*model, eo);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(--moe-predict) needs a mixture-of-experts model"), std::string::npos)
        << e.what();
  }
}

// A ROUTING record's predicted experts read back; a prediction count that does not fit the record is an error.
TEST(MoePredict, RoutingRecordPredictionRoundTrip) {
  const std::string path = (fs::temp_directory_path() / fmt::format("tt-predict-{}.bin", ::getpid())).string();
  const int32_t experts[3] = {5, 0, 63}, predicted[3] = {63, 7, 5};
  const float weights[3] = {0.5f, 0.25f, 0.125f};
  {
    trace::TraceWriter w(path);
    w.routing(1, 2, 3, experts, weights, 0.25f, predicted);
    w.routing(1, 3, 3, experts, weights, 0.25f);
    w.flush();
  }
  const trace::TraceContents t = trace::read_trace(path);
  ASSERT_EQ(t.routing.size(), 2u);
  EXPECT_EQ(t.routing[0].experts, (std::vector<uint32_t>{5, 0, 63}));
  EXPECT_EQ(t.routing[0].predicted, (std::vector<uint32_t>{63, 7, 5}));
  EXPECT_EQ(t.routing[0].margin, 0.25f);
  EXPECT_TRUE(t.routing[1].predicted.empty());
  // The count byte after the margin (file and block headers, record length and kind, 15 + 8k bytes) says 2 of the 3
  // experts; the block's checksum made right again, so that the record is what is refused.
  {
    std::vector<uint8_t> bytes(std::filesystem::file_size(path));
    std::FILE* f = std::fopen(path.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fread(bytes.data(), 1, bytes.size(), f), bytes.size());
    bytes.at(trace::kHeaderBytes + trace::kBlockHeaderBytes + 5 + 15 + 8 * 3) = 2;
    trace::reseal_blocks(bytes);
    std::rewind(f);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
  }
  try {
    trace::read_trace(path);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ROUTING record of 3 experts is 52 bytes, expected 39, or 40 + 4p"),
              std::string::npos)
        << e.what();
  }
  fs::remove(path);
}

class MoePredictShared : public ::testing::TestWithParam<std::string> {};

TEST_P(MoePredictShared, LogitsBitIdentical) {
  TT_REQUIRE_SHARED();
  auto model = load_model(test::shared_path("models/" + GetParam() + ".gguf"));
  expect_bit_identical(greedy_logits(*model, false, 8), greedy_logits(*model, true, 8));
}

INSTANTIATE_TEST_SUITE_P(Models, MoePredictShared,
                         ::testing::Values("synth-qwen3moe-256.Q4_K_M", "synth-mixtral-256.Q4_K_M"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

std::string make_run(const std::string& model, const std::string& name, bool predict, const std::string& prompt,
                     int n_predict = 8) {
  const std::string dir = ::testing::TempDir() + "tt-predict-" + name;
  fs::remove_all(dir);
  ExperimentOptions o;
  o.model_path = model;
  o.prompt = prompt;
  o.n_predict = n_predict;
  o.n_threads = 2;
  o.sampling.temperature = 0;
  o.run_dir = dir;
  o.progress = false;
  o.moe_predict = predict;
  run_experiment(o, nullptr);
  return dir;
}

// Recall of both predictors per (layer, phase), counted here from the trace's routing records alone.
TEST(MoePredictRun, RecallEqualsAnIndependentCount) {
  TT_REQUIRE_SHARED();
  const std::string dir =
      make_run(test::shared_path("models/synth-qwen3moe-256.Q4_K_M.gguf"), "recall", true, "Once upon a time");
  const RunData run = load_run(dir);
  EXPECT_EQ(run.run["options"]["moe_predict"], true);
  std::map<uint32_t, Phase> phase;
  for (const trace::StepMarker& s : run.trace.steps) phase[s.step] = s.phase;
  int first_layer = INT32_MAX;
  for (const trace::RoutingRecord& r : run.trace.routing) first_layer = std::min<int>(first_layer, r.layer);

  // (layer, phase) -> (tokens, sum of |predicted ∩ chosen| / chosen), for each predictor.
  std::map<std::pair<int, std::string>, std::pair<uint64_t, double>> next, previous;
  std::map<int, const trace::RoutingRecord*> last;  // per layer: the token routed in it before
  auto add = [](std::pair<uint64_t, double>& acc, const std::vector<uint32_t>& pred, const std::vector<uint32_t>& got) {
    size_t common = 0;
    for (uint32_t e : got) common += std::count(pred.begin(), pred.end(), e);
    ++acc.first;
    acc.second += static_cast<double>(common) / got.size();
  };
  // Records are by step, then layer, then position: visit tokens in execution order (step, position, layer).
  std::map<std::tuple<uint32_t, int32_t, int>, const trace::RoutingRecord*> ordered;
  for (const trace::RoutingRecord& r : run.trace.routing) ordered[{r.step, r.token_pos, r.layer}] = &r;
  for (const auto& [key, r] : ordered) {
    const std::string ph = phase_name(phase[r->step]);
    EXPECT_EQ(r->predicted.empty(), r->layer == first_layer) << "step " << r->step << " layer " << r->layer;
    if (!r->predicted.empty()) add(next[{r->layer, ph}], r->predicted, r->experts);
    if (last.count(r->layer)) add(previous[{r->layer, ph}], last[r->layer]->experts, r->experts);
    last[r->layer] = r;
  }
  AnalyzeOptions opt;
  opt.measure_bandwidth = false;
  const Report rep = analyze(run, opt);
  ASSERT_TRUE(rep.moe.has_value());
  ASSERT_TRUE(rep.moe->predictions);
  size_t checked = 0;
  for (const LayerRecall& l : rep.moe->recall) {
    for (const auto& [ph, r] : l.next_layer) {
      const auto& want = next.at({l.layer, ph});
      EXPECT_EQ(r.tokens, want.first);
      EXPECT_NEAR(r.recall, want.second / want.first, 1e-12) << "layer " << l.layer << " " << ph;
      ++checked;
    }
    for (const auto& [ph, r] : l.previous_token) {
      const auto& want = previous.at({l.layer, ph});
      EXPECT_EQ(r.tokens, want.first);
      EXPECT_NEAR(r.recall, want.second / want.first, 1e-12) << "layer " << l.layer << " " << ph;
      ++checked;
    }
  }
  EXPECT_EQ(checked, next.size() + previous.size());
  const nlohmann::json j = to_json(rep);
  EXPECT_EQ(j["moe"]["prediction"]["per_layer"].size(), rep.moe->recall.size());
  EXPECT_NE(render_text(rep).find("prediction recall@"), std::string::npos);

  // Prefetching by the predictions: demand accesses are the same as without, and some prefetches are used.
  opt.experts.sizes = {parse_expert_cache_size("2")};
  opt.experts.policies = {CachePolicy::LRU};
  const ExpertCacheResult plain = analyze(run, opt).moe->cache.at(0);
  opt.experts.prefetch = Prefetch::PREDICTED;
  const ExpertCacheResult pre = analyze(run, opt).moe->cache.at(0);
  EXPECT_EQ(pre.accesses, plain.accesses);
  EXPECT_GT(pre.prefetches, 0u);
  EXPECT_GT(pre.useful_prefetches, 0u);
  const auto [low, high] = std::minmax_element(rep.moe->shape.expert_bytes.begin(), rep.moe->shape.expert_bytes.end());
  EXPECT_GE(pre.prefetch_bytes, pre.prefetches * *low);
  EXPECT_LE(pre.prefetch_bytes, pre.prefetches * *high);
}

// A workload where each object is prefetched just before its use: every demand miss becomes a hit, under every
// policy; a prefetch of a resident object does nothing, and one never used is not useful.
TEST(CacheSim, PrefetchTurnsMissesIntoHits) {
  auto stream = [](const std::vector<std::pair<uint64_t, bool>>& keys) {
    std::vector<Access> s;
    for (const auto& [k, prefetch] : keys) s.push_back({k, 1, 0, prefetch});
    return s;
  };
  const auto demand = stream({{1, false}, {2, false}, {3, false}, {1, false}});
  const auto prefetched = stream({{1, true},
                                  {1, false},
                                  {2, true},
                                  {2, false},
                                  {3, true},
                                  {3, false},
                                  {1, true},
                                  {1, false},
                                  {1, true},    // resident: nothing
                                  {4, true}});  // never used
  for (CachePolicy p : {CachePolicy::LRU, CachePolicy::LFU, CachePolicy::FIFO, CachePolicy::LRU2,
                        CachePolicy::LEAST_STALE, CachePolicy::OPT}) {
    SCOPED_TRACE(policy_name(p));
    // OPT keeps 1 for its second use (3 misses on demand; its second prefetch finds it resident).
    const bool opt = p == CachePolicy::OPT;
    const CacheResult d = simulate_cache(demand, 2, p);
    EXPECT_EQ(d.misses, opt ? 3u : 4u);
    EXPECT_EQ(d.prefetches, 0u);
    const CacheResult r = simulate_cache(prefetched, 2, p);
    EXPECT_EQ(r.accesses, 4u);
    EXPECT_EQ(r.hits, 4u);
    EXPECT_EQ(r.misses, 0u);
    EXPECT_EQ(r.cold_misses, 0u);
    EXPECT_EQ(r.prefetches, opt ? 4u : 5u);
    EXPECT_EQ(r.prefetch_bytes, r.prefetches);
    EXPECT_EQ(r.useful_prefetches, opt ? 3u : 4u);
  }
  // OPT's next use is the next demand access: a prefetch between does not count.
  EXPECT_EQ(next_use(stream({{1, false}, {1, true}, {2, false}, {1, false}})), (std::vector<size_t>{3, 3, 4, 4}));
}

// Pooling two runs replays their accesses one after another; runs of different models are refused by name.
TEST(MoePredictRun, PoolingEqualsTheConcatenatedReplay) {
  TT_REQUIRE_SHARED();
  const std::string model = test::shared_path("models/synth-qwen3moe-256.Q4_K_M.gguf");
  const RunData a = load_run(make_run(model, "pool-a", false, "Once upon a time"));
  const RunData b = load_run(make_run(model, "pool-b", false, "The cat sat on the mat and", 5));
  ExpertCacheOptions opt;
  for (const char* size : {"1", "4", "25%"}) opt.sizes.push_back(parse_expert_cache_size(size));
  for (CacheScope scope : {CacheScope::GLOBAL, CacheScope::PER_LAYER}) {
    opt.scope = scope;
    const PooledExpertCache pooled = pooled_expert_cache({&a, &b}, opt);
    EXPECT_EQ(pooled.runs, (std::vector<std::string>{a.dir, b.dir}));
    const MoeShape shape = moe_shape(a);
    std::vector<Access> all = expert_accesses(a, shape), more = expert_accesses(b, shape);
    all.insert(all.end(), more.begin(), more.end());
    const std::vector<ExpertCacheResult> want = replay_expert_cache(all, shape, opt);
    ASSERT_EQ(pooled.cache.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      SCOPED_TRACE(fmt::format("{} {} {}", scope_name(scope), want[i].size, policy_name(want[i].policy)));
      EXPECT_EQ(pooled.cache[i].accesses, want[i].accesses);
      EXPECT_EQ(pooled.cache[i].hits, want[i].hits);
      EXPECT_EQ(pooled.cache[i].bytes_loaded, want[i].bytes_loaded);
      // The pool holds the second run's accesses too.
      const auto alone_a = replay_expert_cache(expert_accesses(a, shape), shape, opt);
      EXPECT_GT(pooled.cache[i].accesses, alone_a[i].accesses);
    }
  }
  const RunData other = load_run(
      make_run(test::shared_path("models/synth-mixtral-256.Q4_K_M.gguf"), "pool-c", false, "Once upon a time", 2));
  try {
    pooled_expert_cache({&a, &other}, opt);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(a.dir), std::string::npos) << m;
    EXPECT_NE(m.find(other.dir), std::string::npos) << m;
    EXPECT_NE(m.find("cannot be pooled"), std::string::npos) << m;
  }
  // Prefetching by predictions needs a run that recorded them.
  opt.prefetch = Prefetch::PREDICTED;
  EXPECT_THROW(pooled_expert_cache({&a}, opt), Error);
}

}  // namespace
}  // namespace tt
