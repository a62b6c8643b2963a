// `diff` on mixture-of-experts runs: routing decisions that flip between two runs, per layer, and the first token
// whose expert set differs. Hand-made routing with known answers, and real runs of synth-qwen3moe-256.
#include "analysis/diff.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <tuple>

#include "support/paths.h"
#include "tracer/experiment.h"

namespace tt::analysis {
namespace {

trace::RoutingRecord rec(uint32_t step, int layer, int32_t pos, std::vector<uint32_t> experts) {
  trace::RoutingRecord r;
  r.step = step;
  r.layer = static_cast<uint16_t>(layer);
  r.token_pos = pos;
  r.weights.assign(experts.size(), 0.5f);
  r.experts = std::move(experts);
  return r;
}

// Three steps (a 3-token prompt, two generated tokens), two routed layers, top 2; `tokens` are those each step
// chose (the next step's input).
RunData routed_run(const std::vector<int32_t>& tokens) {
  RunData r;
  r.dir = "run";
  const int32_t begins[] = {0, 3, 4}, ends[] = {3, 4, 5};
  for (uint32_t s = 0; s < 3; ++s) {
    trace::StepMarker m;
    m.step = s;
    m.phase = s ? Phase::GENERATE : Phase::PROMPT;
    m.pos_begin = begins[s];
    m.pos_end = ends[s];
    m.token = tokens[s];
    m.ended = true;
    r.trace.steps.push_back(m);
    RunStep st;
    st.step = s;
    st.phase = m.phase;
    st.pos_begin = begins[s];
    st.pos_end = ends[s];
    st.input_tokens = s ? std::vector<int32_t>{tokens[s - 1]} : std::vector<int32_t>{1, 2, 3};
    st.token = tokens[s];
    r.steps.push_back(st);
  }
  for (int layer = 0; layer < 2; ++layer)
    for (int32_t pos = 0; pos < 3; ++pos) r.trace.routing.push_back(rec(0, layer, pos, {1, 2}));
  for (int layer = 0; layer < 2; ++layer) r.trace.routing.push_back(rec(1, layer, 3, {3, 4}));
  for (int layer = 0; layer < 2; ++layer) r.trace.routing.push_back(rec(2, layer, 4, {5, 6}));
  return r;
}

TEST(DiffRouting, FlipsPerLayerAndTheFirstDifferingToken) {
  const RunData a = routed_run({10, 11, 13});
  RunData b = routed_run({10, 12, 13});  // step 1 chose another token: position 4 (step 2's input) differs
  for (trace::RoutingRecord& x : b.trace.routing) {
    if (x.step == 0 && x.layer == 1 && x.token_pos == 2) x.experts = {1, 7};  // a flip with the same inputs
    if (x.step == 1 && x.layer == 0) x.experts = {4, 3};                      // the same set reordered: no flip
    if (x.step == 2 && x.layer == 0) x.experts = {5, 9};                      // a flip after the tokens differ
  }
  std::erase_if(b.trace.routing, [](const trace::RoutingRecord& x) { return x.step == 2 && x.layer == 1; });
  const nlohmann::json d = diff_runs(a, b, {});
  ASSERT_TRUE(d.contains("routing")) << d.dump();
  const nlohmann::json& r = d["routing"];
  EXPECT_TRUE(r["available"].get<bool>());
  EXPECT_EQ(r["compared"], 9);
  EXPECT_EQ(r["flips"], 2);
  EXPECT_EQ(r["same_token_positions"], 4);
  EXPECT_EQ(r["flips_with_same_tokens"], 1);
  EXPECT_EQ(r["reordered_only"], 1);
  EXPECT_EQ(r["only_in_a"], 1);
  EXPECT_EQ(r["only_in_b"], 0);
  ASSERT_EQ(r["per_layer"].size(), 2u);
  EXPECT_EQ(r["per_layer"][0]["layer"], 0);
  EXPECT_EQ(r["per_layer"][0]["compared"], 5);
  EXPECT_EQ(r["per_layer"][0]["flips"], 1);
  EXPECT_DOUBLE_EQ(r["per_layer"][0]["flip_rate"].get<double>(), 0.2);
  EXPECT_EQ(r["per_layer"][1]["compared"], 4);
  EXPECT_EQ(r["per_layer"][1]["flips"], 1);
  const nlohmann::json& f = r["first_differing_token"];
  ASSERT_FALSE(f.is_null());
  EXPECT_EQ(f["step"], 0);
  EXPECT_EQ(f["position"], 2);
  EXPECT_EQ(f["layer"], 1);
  EXPECT_EQ(f["a"], nlohmann::json({1, 2}));
  EXPECT_EQ(f["b"], nlohmann::json({1, 7}));
  EXPECT_EQ(f["layers_differing"], 1);
  const std::string text = render_diff_text(d);
  EXPECT_NE(text.find("2 of 9 (token, layer) routing decisions chose a different expert set (1 at positions 0-3 "
                      "whose tokens are the same in both runs)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("first token whose experts differ: step 0 position 2 (1 layers), layer 1: A [1,2] B [1,7]"),
            std::string::npos)
      << text;
}

TEST(DiffRouting, IdenticalRoutingDenseRunsAndOneSided) {
  const RunData a = routed_run({10, 11, 13});
  const nlohmann::json same = diff_runs(a, a, {});
  EXPECT_EQ(same["routing"]["flips"], 0);
  EXPECT_EQ(same["routing"]["compared"], a.trace.routing.size());
  EXPECT_TRUE(same["routing"]["first_differing_token"].is_null());
  EXPECT_NE(render_diff_text(same).find("every token chose the same experts in every layer"), std::string::npos);

  RunData dense = routed_run({10, 11, 13});
  dense.trace.routing.clear();
  EXPECT_FALSE(diff_runs(dense, dense, {}).contains("routing"));
  const nlohmann::json one = diff_runs(dense, a, {});
  EXPECT_FALSE(one["routing"]["available"].get<bool>());
  EXPECT_NE(render_diff_text(one).find("only B has expert routing"), std::string::npos);
}

// Real runs: one and two threads route identically; another prompt flips decisions from the first token it changes.
TEST(DiffRouting, RealMoeRuns) {
  TT_REQUIRE_SHARED();
  const auto make = [](const std::string& name, const std::string& prompt, int threads) {
    const std::string dir = ::testing::TempDir() + "tt-diff-moe-" + name;
    std::filesystem::remove_all(dir);
    ExperimentOptions o;
    o.model_path = test::shared_path("models/synth-qwen3moe-256.Q4_K_M.gguf");
    o.prompt = prompt;
    o.n_predict = 3;
    o.n_threads = threads;
    o.n_ctx = 64;
    o.sampling.temperature = 0;
    o.run_dir = dir;
    o.progress = false;
    run_experiment(o, nullptr);
    return load_run(dir);
  };
  const RunData a = make("t1", "Once upon a time", 1), b = make("t2", "Once upon a time", 2);
  const nlohmann::json same = diff_runs(a, b, {});
  EXPECT_EQ(same["routing"]["flips"], 0);
  EXPECT_EQ(same["routing"]["compared"], a.trace.routing.size());
  const RunData c = make("other", "Once upon a dog", 1);
  const nlohmann::json other = diff_runs(a, c, {});
  ASSERT_GT(other["routing"]["flips"].get<uint64_t>(), 0u);
  // An independent search for the first (step, position, layer) whose expert sets differ.
  const trace::RoutingRecord* first = nullptr;
  for (const trace::RoutingRecord& x : a.trace.routing)
    for (const trace::RoutingRecord& y : c.trace.routing) {
      if (x.step != y.step || x.token_pos != y.token_pos || x.layer != y.layer) continue;
      std::vector<uint32_t> p = x.experts, q = y.experts;
      std::sort(p.begin(), p.end());
      std::sort(q.begin(), q.end());
      if (p == q) continue;
      if (!first || std::tie(x.step, x.token_pos, x.layer) < std::tie(first->step, first->token_pos, first->layer))
        first = &x;
    }
  ASSERT_NE(first, nullptr);
  const nlohmann::json& f = other["routing"]["first_differing_token"];
  EXPECT_EQ(f["step"], first->step);
  EXPECT_EQ(f["position"], first->token_pos);
  EXPECT_EQ(f["layer"], first->layer);
}

}  // namespace
}  // namespace tt::analysis
