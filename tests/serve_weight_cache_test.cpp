// The viewer's /api/runs/{i}/weight-cache on a `run --weight-budget` run: its loads are the trace's WEIGHT_LOAD
// records, its per-step and run totals are steps.jsonl's and run.json's, its occupancy stays within the budget;
// paging, time windows and steps select the right loads; bad parameters are 400s naming them; an unbudgeted run 404.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cache/policy_cache.h"
#include "serve/api.h"
#include "support/paths.h"
#include "trace/run_data.h"
#include "tracer/experiment.h"

namespace tt {
namespace {

using nlohmann::json;

std::string make_run(const std::string& name, const std::string& budget) {
  const std::string dir = ::testing::TempDir() + "tt-serve-wc-" + name;
  std::filesystem::remove_all(dir);
  ExperimentOptions o;
  o.model_path = test::repo_path("models/stories260K.gguf");
  o.prompt = "Once upon a time";
  o.n_predict = 6;
  o.n_threads = 2;
  o.run_dir = dir;
  o.progress = false;
  o.weight_budget = budget;
  run_experiment(o, nullptr);
  return dir;
}

// A budgeted run of its own for the calling test (CTest runs the tests in parallel, each in its own process).
std::string budgeted_run() {
  return make_run(std::string("budget-") + ::testing::UnitTest::GetInstance()->current_test_info()->name(), "50%");
}

json get(const serve::Api& api, const serve::Params& p, int status = 200) {
  const serve::Response r = api.handle("/api/runs/0/weight-cache", p);
  EXPECT_EQ(r.status, status) << r.body;
  return json::parse(r.body);
}

// The occupancy's one definition: the replay's resident bytes once each access was served (its evictions done).
TEST(WeightCacheOccupancy, ReplayGivesResidentBytesAfterEachAccess) {
  using cache::Access;
  // 10 bytes, LRU: A B (one op, both pinned) fill 8; C evicts A (the op ended); A again evicts B; D (8) evicts C and A.
  const std::vector<Access> stream = {{1, 4}, {2, 4}, {3, 4}, {1, 4}, {4, 8}, {5, 20}};
  const std::vector<uint64_t> group = {0, 0, 1, 2, 3, 4};
  cache::PolicyCache c(cache::Policy::LRU, 10);
  std::vector<uint64_t> used;
  const std::vector<bool> hits = cache::replay_pinned(c, stream, group, &used);
  EXPECT_EQ(used, (std::vector<uint64_t>{4, 8, 8, 8, 8, 8}));  // an object larger than the cache is never cached
  EXPECT_EQ(hits, (std::vector<bool>{false, false, false, false, false, false}));
}

TEST(ServeWeightCache, LoadsAndTotalsEqualTheTraceAndSteps) {
  const std::string dir = budgeted_run();
  const RunData run = load_run(dir);
  const std::vector<trace::WeightLoadRecord>& loads = run.trace.weight_loads;
  ASSERT_FALSE(loads.empty());
  const json& wc = run.run["weight_cache"];
  const serve::Api api({dir});
  const json a = get(api, {{"limit", "5000"}});
  EXPECT_EQ(a["budget"], wc["budget"]);
  EXPECT_EQ(a["budget_bytes"], wc["budget_bytes"]);
  EXPECT_EQ(a["policy"], "lru");
  EXPECT_EQ(a["direct_io"], false);

  // Every load, in access order, as the trace has it.
  ASSERT_EQ(a["total"], loads.size());
  ASSERT_EQ(a["loads"].size(), loads.size());
  const json& cols = a["loads_columns"];
  auto col = [&](const char* name) {
    const auto it = std::find(cols.begin(), cols.end(), name);
    EXPECT_NE(it, cols.end()) << name;
    return static_cast<size_t>(it - cols.begin());
  };
  const uint64_t budget = wc["budget_bytes"];
  for (size_t i = 0; i < loads.size(); ++i) {
    const json& row = a["loads"][i];
    const trace::WeightLoadRecord& l = loads[i];
    EXPECT_EQ(row[col("i")], i);
    EXPECT_EQ(row[col("step")], l.step);
    EXPECT_EQ(row[col("node")], l.node);
    EXPECT_EQ(row[col("tensor")], l.tensor);
    EXPECT_EQ(row[col("expert")], l.expert);
    EXPECT_EQ(row[col("offset")], l.offset);
    EXPECT_EQ(row[col("bytes")], l.bytes);
    EXPECT_EQ(row[col("start_ns")], l.start_ns);
    EXPECT_EQ(row[col("end_ns")], l.end_ns);
    EXPECT_EQ(row[col("wait_ns")], l.wait_ns);
    EXPECT_EQ(row[col("hit")], l.hit);
    EXPECT_EQ(row[col("prefetch")], l.prefetch);
    EXPECT_LE(row[col("resident_bytes")].get<uint64_t>(), budget) << i;
    if (!l.hit) {
      EXPECT_GT(row[col("resident_bytes")].get<uint64_t>(), 0u) << i;
    }
  }

  // Per step: steps.jsonl's weight_* fields.
  ASSERT_EQ(a["steps"].size(), run.steps.size());
  for (size_t s = 0; s < run.steps.size(); ++s) {
    const json& row = a["steps"][s];
    const json& line = run.steps[s].json;
    EXPECT_EQ(row["step"], s);
    EXPECT_EQ(row["hits"], line["weight_hits"]) << s;
    EXPECT_EQ(row["misses"], line["weight_misses"]) << s;
    EXPECT_EQ(row["bytes_read"], line["weight_bytes_read"]) << s;
    EXPECT_EQ(row["stall_ns"], line["weight_stall_ns"]) << s;
    EXPECT_EQ(row["prefetches"], 0) << s;
  }
  // The run: run.json's weight_cache.
  const json& t = a["totals"];
  EXPECT_EQ(t["accesses"], wc["accesses"]);
  EXPECT_EQ(t["hits"], wc["hits"]);
  EXPECT_EQ(t["misses"], wc["misses"]);
  EXPECT_EQ(t["bytes_read"], wc["bytes_read"]);
  EXPECT_EQ(t["read_bytes_per_s"], wc["read_bytes_per_s"]);
  EXPECT_EQ(t["prefetches"], 0);
  // The replay's occupancy: never above the budget, and its peak is the run's (no prefetch: the same cache).
  EXPECT_EQ(t["peak_resident_bytes"], wc["peak_resident_bytes"]);
  EXPECT_EQ(a["occupancy"].size(), a["px"].get<size_t>());
  uint64_t peak = 0;
  for (const json& v : a["occupancy"]) {
    EXPECT_LE(v.get<uint64_t>(), budget);
    peak = std::max(peak, v.get<uint64_t>());
  }
  EXPECT_EQ(peak, t["peak_resident_bytes"]);
}

// The heatmap of a budgeted run marks the bytes its cache read from storage: every miss's unit up to the step.
TEST(ServeWeightCache, HeatmapMarksTheBytesReadFromStorage) {
  const std::string dir = budgeted_run();
  const RunData run = load_run(dir);
  const serve::Api api({dir});
  const json all = json::parse(api.handle("/api/runs/0/heatmap", {}).body);
  ASSERT_TRUE(all.contains("storage")) << all.dump().substr(0, 200);
  EXPECT_EQ(all["storage"]["bytes"], run.run["weight_cache"]["bytes_read"]);
  EXPECT_EQ(all["storage"]["bins"].size(), all["bins"].get<size_t>());
  uint64_t step2 = 0;
  for (const auto& l : run.trace.weight_loads) step2 += l.step == 2 && !l.hit ? l.bytes : 0;
  const json one = json::parse(api.handle("/api/runs/0/heatmap", {{"step", "2"}, {"cumulative", "0"}}).body);
  EXPECT_EQ(one["storage"]["bytes"], step2);
  const json plain = json::parse(serve::Api({make_run("plain-heat", "")}).handle("/api/runs/0/heatmap", {}).body);
  EXPECT_FALSE(plain.contains("storage"));
}

TEST(ServeWeightCache, PagesWindowsAndStepsSelectTheirLoads) {
  const std::string dir = budgeted_run();
  const RunData run = load_run(dir);
  const std::vector<trace::WeightLoadRecord>& loads = run.trace.weight_loads;
  const serve::Api api({dir});
  // Pages of 7 put together are every load.
  std::vector<uint64_t> seen;
  for (size_t off = 0; off < loads.size(); off += 7) {
    const json p = get(api, {{"offset", std::to_string(off)}, {"limit", "7"}});
    EXPECT_EQ(p["offset"], off);
    EXPECT_EQ(p["total"], loads.size());
    for (const json& row : p["loads"]) seen.push_back(row[0]);
  }
  ASSERT_EQ(seen.size(), loads.size());
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i);
  EXPECT_TRUE(get(api, {{"offset", std::to_string(loads.size())}})["loads"].empty());

  // One step: its loads only.
  size_t in_step1 = 0;
  for (const auto& l : loads) in_step1 += l.step == 1;
  const json s1 = get(api, {{"step", "1"}, {"limit", "5000"}});
  EXPECT_EQ(s1["total"], in_step1);
  for (const json& row : s1["loads"]) EXPECT_EQ(row[1], 1);

  // A time window: the loads overlapping it.
  const uint64_t t0 = run.steps[2].start_ns, t1 = run.steps[3].end_ns;
  size_t overlapping = 0;
  for (const auto& l : loads) overlapping += l.end_ns >= t0 && l.start_ns <= t1;
  ASSERT_GT(overlapping, 0u);
  const json w = get(api, {{"t0", std::to_string(t0)}, {"t1", std::to_string(t1)}, {"limit", "5000"}, {"px", "10"}});
  EXPECT_EQ(w["total"], overlapping);
  EXPECT_EQ(w["occupancy"].size(), 10u);
  EXPECT_EQ(w["t0"], t0);
  EXPECT_EQ(w["t1"], t1);
}

TEST(ServeWeightCache, BadParametersAre400NamingThem) {
  const std::string dir = budgeted_run();
  const serve::Api api({dir});
  for (const auto& [p, words] :
       std::vector<std::pair<serve::Params, std::string>>{{{{"offset", "-1"}}, "'offset'"},
                                                          {{{"offset", "99999999"}}, "'offset'"},
                                                          {{{"limit", "5001"}}, "'limit'"},
                                                          {{{"limit", "x"}}, "'limit'"},
                                                          {{{"step", "999"}}, "step"},
                                                          {{{"step", "-1"}}, "'step'"},
                                                          {{{"px", "0"}}, "'px'"},
                                                          {{{"px", "20001"}}, "'px'"},
                                                          {{{"t0", "-5"}}, "'t0'"},
                                                          {{{"t0", "nan"}}, "'t0'"},
                                                          {{{"t0", "100"}, {"t1", "50"}}, "'t1'"}}) {
    const json e = get(api, p, 400);
    EXPECT_NE(e["error"].get<std::string>().find(words), std::string::npos) << e.dump();
  }
}

// A weight_cache whose policy the replay does not know: the route says so (422), the run's other routes still answer.
// (One that is not typed as written is refused with the whole run by the loader: Export.LoaderErrors.)
TEST(ServeWeightCache, UnknownPolicyIs422OnItsRouteAlone) {
  const std::string dir = budgeted_run();
  const std::string bad = ::testing::TempDir() + "tt-serve-wc-bad-policy";
  std::filesystem::remove_all(bad);
  std::filesystem::copy(dir, bad, std::filesystem::copy_options::recursive);
  json run = json::parse(std::ifstream(bad + "/run.json"));
  run["weight_cache"]["policy"] = "bogus";
  std::ofstream(bad + "/run.json") << run.dump();
  const serve::Api api({bad});
  const json e = get(api, {}, 422);
  EXPECT_NE(e["error"].get<std::string>().find("weight_cache.policy 'bogus'"), std::string::npos) << e.dump();
  EXPECT_EQ(api.handle("/api/runs/0/heatmap", {}).status, 200);
  EXPECT_EQ(json::parse(api.handle("/api/runs/0/run", {}).body)["derived"]["weight_budget"], true);
}

TEST(ServeWeightCache, RunWithoutBudgetIs404) {
  const std::string dir = budgeted_run();
  const serve::Api api({make_run("plain", "")});
  const json e = get(api, {}, 404);
  EXPECT_NE(e["error"].get<std::string>().find("weight budget"), std::string::npos) << e.dump();
  const json info = json::parse(api.handle("/api/runs/0/run", {}).body);
  EXPECT_EQ(info["derived"]["weight_budget"], false);
  const json b = json::parse(serve::Api({dir}).handle("/api/runs/0/run", {}).body);
  EXPECT_EQ(b["derived"]["weight_budget"], true);
}

}  // namespace
}  // namespace tt
