// Exporters (src/export/): a 3-step run of stories260K is made once, loaded with load_run and exported in every
// format; the outputs are checked against the trace reader's records.
#include "export/export.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "analysis/analysis.h"
#include "core/error.h"
#include "support/paths.h"
#include "tracer/experiment.h"

namespace tt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& p) {
  std::ifstream f(p);
  EXPECT_TRUE(f.good()) << p;
  return json::parse(f);
}

class Export : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::temp_directory_path() / ("tt-export-test-" + std::to_string(::getpid())));
    fs::remove_all(*root_);
    fs::create_directories(*root_);
    ExperimentOptions o;
    o.model_path = test::repo_path("models/stories260K.gguf");
    o.prompt = "Once upon a time";
    o.n_predict = 3;
    o.n_threads = 2;
    o.sampling.temperature = 0;
    o.trace_options.values = true;
    o.run_dir = (*root_ / "run").string();
    o.progress = false;
    run_experiment(o, nullptr);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
  }
  static std::string run_dir() { return (*root_ / "run").string(); }
  static fs::path root() { return *root_; }
  static fs::path* root_;
};
fs::path* Export::root_ = nullptr;

TEST_F(Export, LoaderReadsEveryFile) {
  RunData r = load_run(run_dir() + "/");
  EXPECT_EQ(r.dir, run_dir());
  EXPECT_TRUE(r.finished);
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
  ASSERT_TRUE(r.trace.complete);
  ASSERT_EQ(r.steps.size(), 3u);
  ASSERT_EQ(r.trace.steps.size(), 3u);
  EXPECT_EQ(r.n_threads(), 2);
  EXPECT_EQ(r.steps[0].phase, Phase::PROMPT);
  EXPECT_EQ(r.steps[1].phase, Phase::GENERATE);
  EXPECT_EQ(r.graphs.size(), 2u);  // the prompt graph and the shared generation graph
  size_t ops = 0;
  for (const RunStep& s : r.steps) {
    auto step_ops = r.ops_of_step(s.step);
    EXPECT_EQ(step_ops.size(), s.n_ops);
    for (size_t i = 0; i < step_ops.size(); ++i) EXPECT_EQ(step_ops[i].node, i);
    for (const auto& sp : r.spans_of_step(s.step)) EXPECT_EQ(sp.step, s.step);
    ASSERT_NE(r.graph_of_step(s.step), nullptr);
    ops += step_ops.size();
  }
  EXPECT_EQ(ops, r.trace.ops.size());
  EXPECT_TRUE(r.ops_of_step(99).empty());
  ASSERT_FALSE(r.tensors.empty());
  EXPECT_EQ(r.tensors.size(), r.memory_map["tensors"].size());
  const MapTensor* q = r.tensor_named("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(r.tensor_at(q->offset_start), q);
  EXPECT_EQ(r.tensor_at(q->offset_end - 1), q);
  EXPECT_EQ(r.tensor_at(0), nullptr);  // the header
  EXPECT_FALSE(r.buffer_events.empty());
  EXPECT_EQ(r.buffer_steps.size(), 3u);
  EXPECT_GT(r.peak_bytes, 0u);
  EXPECT_EQ(r.model_config()["n_layer"], 5);

  RunData light = load_run(run_dir(), {.trace = false, .graphs = false, .buffers = false});
  EXPECT_TRUE(light.trace.ops.empty());
  EXPECT_TRUE(light.graphs.empty());
  EXPECT_EQ(light.steps.size(), 3u);
}

TEST_F(Export, LayerFromName) {
  EXPECT_EQ(layer_from_name("blk.12.attn_q.weight"), 12);
  EXPECT_EQ(layer_from_name("Qcur-3"), 3);
  EXPECT_EQ(layer_from_name("cache_k_l4 (view)"), 4);
  EXPECT_EQ(layer_from_name("cache_v_l0"), 0);
  EXPECT_EQ(layer_from_name("token_embd.weight"), std::nullopt);
  EXPECT_EQ(layer_from_name("inp_tokens"), std::nullopt);
  EXPECT_EQ(layer_from_name("result_norm"), std::nullopt);
}

// ts/dur are exact decimal µs with 3 decimals: back to integer ns.
int64_t ns_of(const json& v) { return std::llround(v.get<double>() * 1000.0); }

TEST_F(Export, PerfettoIsValidTraceEventJson) {
  RunData r = load_run(run_dir());
  int progress_calls = 0;
  const std::string out = (root() / "perfetto" / "t.json").string();
  fs::create_directories(root() / "perfetto");
  exporter::export_perfetto(r, out, [&](std::string_view) { ++progress_calls; });
  EXPECT_EQ(progress_calls, 3);
  const json j = read_json(out);
  ASSERT_TRUE(j.contains("traceEvents"));
  EXPECT_EQ(j["otherData"]["trace_complete"], true);

  size_t views = 0;
  for (const auto& o : r.trace.ops) views += o.n_threads == 0;
  ASSERT_GT(views, 0u);

  size_t op_slices = 0, view_slices = 0, step_slices = 0, counters = 0;
  std::set<std::string> thread_names;
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> per_tid;  // tid -> [start, end) of op slices
  std::map<int64_t, std::pair<int64_t, int64_t>> step_range;
  std::vector<std::tuple<int64_t, int64_t, int64_t>> op_in_step;  // step, start, end
  for (const json& e : j["traceEvents"]) {
    for (const char* k : {"ph", "ts", "pid", "tid", "name"}) ASSERT_TRUE(e.contains(k)) << k << " in " << e.dump();
    ASSERT_TRUE(e["ts"].is_number());
    ASSERT_TRUE(e["name"].is_string());
    const std::string ph = e["ph"];
    if (ph == "M") {
      if (e["name"] == "thread_name") thread_names.insert(e["args"]["name"].get<std::string>());
      continue;
    }
    if (ph == "C") {
      ++counters;
      ASSERT_TRUE(e["args"]["bytes"].is_number_integer());
      EXPECT_GE(e["args"]["bytes"].get<int64_t>(), 0) << e.dump();
      continue;
    }
    ASSERT_EQ(ph, "X") << e.dump();
    ASSERT_TRUE(e.contains("dur")) << e.dump();
    ASSERT_GE(e["dur"].get<double>(), 0.0);
    const int64_t start = ns_of(e["ts"]), end = start + ns_of(e["dur"]);
    const std::string cat = e["cat"];
    if (cat == "step") {
      ++step_slices;
      EXPECT_EQ(e["tid"], 0);
      step_range[e["args"]["step"].get<int64_t>()] = {start, end};
    } else if (cat == "view") {
      ++view_slices;
      EXPECT_EQ(e["tid"], 1);  // worker 0
      EXPECT_EQ(e["dur"], 0);
    } else {
      ASSERT_EQ(cat, "op");
      ++op_slices;
      per_tid[e["tid"].get<int64_t>()].push_back({start, end});
      const json& a = e["args"];
      for (const char* k : {"step", "phase", "layer", "node", "bytes_read", "output"}) EXPECT_TRUE(a.contains(k)) << k;
      EXPECT_EQ(e["name"], std::string(a["op"]) + " " + std::string(a["output"]["name"]));
      op_in_step.push_back({a["step"].get<int64_t>(), start, end});
      if (a["op"] == "MUL_MAT") {
        EXPECT_GT(a["bytes_read"]["MODEL_FILE"].get<uint64_t>(), 0u);
        EXPECT_TRUE(a.contains("file_ranges"));
      }
    }
  }
  EXPECT_EQ(op_slices, r.trace.spans.size());
  EXPECT_EQ(view_slices, views);
  EXPECT_EQ(op_slices + view_slices, r.trace.spans.size() + views);
  EXPECT_EQ(step_slices, r.steps.size());
  EXPECT_EQ(counters, r.buffer_events.size());
  EXPECT_TRUE(thread_names.count("worker 0") && thread_names.count("worker 1") && thread_names.count("steps"));
  // A worker runs one op at a time: its slices do not overlap.
  for (auto& [tid, v] : per_tid) {
    std::sort(v.begin(), v.end());
    for (size_t i = 1; i < v.size(); ++i) ASSERT_LE(v[i - 1].second, v[i].first) << "tid " << tid << " slice " << i;
  }
  // Ops lie within their step.
  for (auto [step, start, end] : op_in_step) {
    ASSERT_TRUE(step_range.count(step));
    EXPECT_GE(start, step_range[step].first);
    EXPECT_LE(end, step_range[step].second);
  }
}

struct Sqlite {
  sqlite3* db = nullptr;
  explicit Sqlite(const std::string& path) {
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK) << path;
  }
  ~Sqlite() { sqlite3_close(db); }
  // Rows of a query as integers (NULL as -1).
  std::vector<std::vector<int64_t>> rows(const std::string& sql) {
    std::vector<std::vector<int64_t>> out;
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db) << ": " << sql;
    while (st && sqlite3_step(st) == SQLITE_ROW) {
      std::vector<int64_t> row;
      for (int c = 0; c < sqlite3_column_count(st); ++c)
        row.push_back(sqlite3_column_type(st, c) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, c));
      out.push_back(row);
    }
    sqlite3_finalize(st);
    return out;
  }
  int64_t value(const std::string& sql) {
    auto r = rows(sql);
    return r.empty() || r[0].empty() ? -999 : r[0][0];
  }
  std::string text(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    std::string s;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
        sqlite3_column_text(st, 0))
      s = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return s;
  }
};

TEST_F(Export, SqliteMatchesTheTrace) {
  RunData r = load_run(run_dir());
  const std::string out = (root() / "db.sqlite").string();
  exporter::export_sqlite(r, out);
  for (const auto& e : fs::directory_iterator(root()))
    EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path();  // no temporary left
  Sqlite db(out);
  EXPECT_EQ(db.value("SELECT count(*) FROM ops"), static_cast<int64_t>(r.trace.ops.size()));
  EXPECT_EQ(db.value("SELECT count(*) FROM spans"), static_cast<int64_t>(r.trace.spans.size()));
  EXPECT_EQ(db.value("SELECT count(*) FROM steps"), static_cast<int64_t>(r.steps.size()));
  EXPECT_EQ(db.value("SELECT count(*) FROM tensors"), static_cast<int64_t>(r.tensors.size()));
  EXPECT_EQ(db.value("SELECT count(*) FROM buffers"), static_cast<int64_t>(r.buffer_events.size()));
  size_t inputs = 0, ranges = 0;
  for (const auto& o : r.trace.ops) {
    inputs += o.inputs.size();
    for (const auto& in : o.inputs) ranges += in.ranges.size();
  }
  EXPECT_EQ(db.value("SELECT count(*) FROM op_inputs"), static_cast<int64_t>(inputs));
  EXPECT_EQ(db.value("SELECT count(*) FROM ranges"), static_cast<int64_t>(ranges));
  EXPECT_EQ(db.value("SELECT count(*) FROM spans WHERE op_id IS NULL"), 0);
  EXPECT_EQ(db.value("SELECT count(*) FROM ops WHERE is_view = 0 AND stat_hash IS NULL"), 0);  // --trace-values
  EXPECT_EQ(db.text("SELECT value FROM run_info WHERE key = 'trace_complete'"), "1");

  // Bytes read from the model file per step, from SQL and from the trace reader.
  std::map<int64_t, int64_t> expected;
  for (const auto& o : r.trace.ops)
    for (const auto& in : o.inputs)
      for (const auto& rg : in.ranges)
        if (rg.pool == Pool::MODEL_FILE) expected[o.step] += static_cast<int64_t>(rg.length);
  auto rows = db.rows(
      "SELECT o.step, sum(r.length) FROM ranges r JOIN ops o ON o.id = r.op_id WHERE r.pool = 'MODEL_FILE' "
      "GROUP BY o.step ORDER BY o.step");
  ASSERT_EQ(rows.size(), expected.size());
  for (const auto& row : rows) EXPECT_EQ(row[1], expected[row[0]]) << "step " << row[0];
  // The per-op column agrees with the ranges.
  EXPECT_EQ(db.value("SELECT sum(file_bytes_read) FROM ops"),
            db.value("SELECT sum(length) FROM ranges WHERE pool = 'MODEL_FILE'"));
  // Every MODEL_FILE range lies inside a tensor of the memory map.
  EXPECT_EQ(db.value("SELECT count(*) FROM ranges r WHERE pool = 'MODEL_FILE' AND NOT EXISTS (SELECT 1 FROM "
                     "tensors t WHERE r.offset >= t.offset_start AND r.offset + r.length <= t.offset_end)"),
            0);
  // Exporting again replaces the database.
  exporter::export_sqlite(r, out);
  Sqlite again(out);
  EXPECT_EQ(again.value("SELECT count(*) FROM ops"), static_cast<int64_t>(r.trace.ops.size()));
}

TEST_F(Export, TokensJsonPerStep) {
  RunData r = load_run(run_dir());
  const fs::path out = root() / "tokens" / "tj";
  exporter::export_tokens_json(r, out.string());
  exporter::export_tokens_json(r, out.string());  // replaces the first export
  ASSERT_TRUE(fs::exists(out / "memory-map.json"));
  ASSERT_TRUE(fs::exists(out / "buffer-timeline.json"));
  for (const RunStep& s : r.steps) {
    const std::string file = fmt::format("token-{:05}.json", s.step);
    const json t = read_json(out / "traces" / file);
    EXPECT_EQ(t["token_id"], s.step);
    EXPECT_EQ(t["metadata"]["phase"], s.step == 0 ? "PROMPT" : "GENERATE");
    auto ops = r.ops_of_step(s.step);
    ASSERT_EQ(t["entries"].size(), ops.size());
    EXPECT_EQ(t["metadata"]["total_entries"], ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const json& e = t["entries"][i];
      const trace::OpRecord& o = ops[i];
      EXPECT_EQ(e["entry_id"], i);
      EXPECT_EQ(e["token_id"], s.step);
      EXPECT_EQ(e["phase"], phase_name(o.phase));
      EXPECT_EQ(e["dst_name"], o.name);
      EXPECT_EQ(e["operation_type"], op_name(o.op));
      if (o.layer >= 0)
        EXPECT_EQ(e["layer_id"], o.layer);
      else
        EXPECT_TRUE(e["layer_id"].is_null());
      ASSERT_EQ(e["num_sources"], o.inputs.size());
      ASSERT_EQ(e["sources"].size(), o.inputs.size());
      for (size_t k = 0; k < o.inputs.size(); ++k) {
        const json& src = e["sources"][k];
        const trace::TensorRecord& in = o.inputs[k];
        EXPECT_EQ(src["name"], in.name);
        EXPECT_EQ(src["size_bytes"].get<uint64_t>(), in.bytes);
        if (in.pool == Pool::MODEL_FILE) {
          EXPECT_EQ(src["memory_source"], "DISK");
          EXPECT_EQ(src["disk_offset"].get<uint64_t>(), in.offset);
          EXPECT_FALSE(src.contains("buffer_id"));
          const MapTensor* w = r.tensor_named(in.name);
          ASSERT_NE(w, nullptr) << in.name;
          EXPECT_EQ(src["size_bytes"].get<uint64_t>(), w->size_bytes);
        } else {
          EXPECT_EQ(src["memory_source"], "BUFFER");
          EXPECT_EQ(src["buffer_id"], in.buffer_id);
          EXPECT_FALSE(src.contains("disk_offset"));
        }
      }
    }
    const json g = read_json(out / "graphs" / file);
    EXPECT_EQ(g["token_id"], s.step);
    EXPECT_EQ(g["metadata"]["total_nodes"], g["nodes"].size());
    EXPECT_EQ(g["metadata"]["total_edges"], g["edges"].size());
    EXPECT_EQ(g["metadata"]["layers"], 5);
    size_t computed = 0;
    for (const json& n : g["nodes"]) computed += n["operation"] != "NONE";
    EXPECT_EQ(computed, ops.size());
  }
  EXPECT_FALSE(fs::exists(out / "traces" / fmt::format("token-{:05}.json", r.steps.size())));

  const json mm = read_json(out / "memory-map.json");
  ASSERT_EQ(mm["tensors"].size(), r.tensors.size());
  EXPECT_EQ(mm["metadata"]["n_layers"], 5);
  EXPECT_EQ(mm["metadata"]["n_vocab"], 512);
  EXPECT_EQ(mm["metadata"]["n_embd"], 64);
  const std::set<std::string> components = {"query", "key",  "value",     "output", "gate",
                                            "up",    "down", "embedding", "norm"};
  const std::set<std::string> categories = {"embedding", "attention", "ffn", "output"};
  for (const json& t : mm["tensors"]) {
    EXPECT_EQ(t["dtype"], "f32");
    EXPECT_TRUE(components.count(t["component"])) << t.dump();
    EXPECT_TRUE(categories.count(t["category"])) << t.dump();
    EXPECT_EQ(t["offset_end"].get<uint64_t>() - t["offset_start"].get<uint64_t>(), t["size_bytes"].get<uint64_t>());
  }
  const json bt = read_json(out / "buffer-timeline.json");
  EXPECT_EQ(bt["events"].size(), r.buffer_events.size());
  EXPECT_EQ(bt["peak_bytes"], r.peak_bytes);
  // Nothing temporary is left next to the output.
  for (const auto& e : fs::directory_iterator(out.parent_path())) EXPECT_EQ(e.path(), out);
}

TEST_F(Export, LoaderErrors) {
  auto error_of = [](const std::string& dir) -> std::string {
    try {
      load_run(dir);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  const fs::path bad = root() / "bad";
  fs::create_directories(bad);
  EXPECT_NE(error_of((bad / "missing").string()).find("does not exist"), std::string::npos);
  EXPECT_NE(error_of(bad.string()).find("is not a run directory"), std::string::npos);
  std::ofstream(bad / "file.txt") << "x";
  EXPECT_NE(error_of((bad / "file.txt").string()).find("is not a directory"), std::string::npos);

  // A copy with a corrupt run.json, a corrupt steps line, a wrong graph.
  const fs::path copy = root() / "corrupt";
  fs::copy(run_dir(), copy, fs::copy_options::recursive);
  std::ofstream(copy / "run.json") << "{ not json";
  std::string msg = error_of(copy.string());
  EXPECT_NE(msg.find("run.json': invalid JSON"), std::string::npos) << msg;
  fs::copy_file(fs::path(run_dir()) / "run.json", copy / "run.json", fs::copy_options::overwrite_existing);
  std::ofstream(copy / "buffers.json")
      << R"({"format":"tensortrace.buffers","events":[[1,2]],"steps":[],"peak_bytes":0})";
  msg = error_of(copy.string());
  EXPECT_NE(msg.find("buffers.json': a buffer event has 9 columns"), std::string::npos) << msg;
  std::ofstream(copy / "buffers.json") << R"({"format":"something else"})";
  msg = error_of(copy.string());
  EXPECT_NE(msg.find("expected \"tensortrace.buffers\""), std::string::npos) << msg;
  fs::copy_file(fs::path(run_dir()) / "buffers.json", copy / "buffers.json", fs::copy_options::overwrite_existing);
  std::ofstream(copy / "steps.jsonl", std::ios::app) << "{\"step\": \"x\"}\n";
  msg = error_of(copy.string());
  EXPECT_NE(msg.find("steps.jsonl:4"), std::string::npos) << msg;
  fs::copy_file(fs::path(run_dir()) / "steps.jsonl", copy / "steps.jsonl", fs::copy_options::overwrite_existing);
  // Thread counts: run.json's within the engine's limit, and no record on a thread the run did not have (readers
  // size per-thread tables from them).
  const json run_json = read_json(fs::path(run_dir()) / "run.json");
  for (auto [threads, expected] : std::initializer_list<std::pair<int, const char*>>{
           {5000, "options.threads is 5000, outside the engine's 1 to 1024"},
           {0, "options.threads is 0, outside"},
           {1, "but the run had 1"}}) {
    json j = run_json;
    j["options"]["threads"] = threads;
    std::ofstream(copy / "run.json", std::ios::trunc) << j.dump();
    msg = error_of(copy.string());
    EXPECT_NE(msg.find(expected), std::string::npos) << msg;
  }
  fs::copy_file(fs::path(run_dir()) / "run.json", copy / "run.json", fs::copy_options::overwrite_existing);
  // A budgeted run's weight_cache: typed, and its phase count and page size bounded (the replay sizes tables by them).
  const json budget = {
      {"budget", "50%"}, {"policy", "lru"}, {"budget_bytes", 4096}, {"n_phases", 7}, {"page_bytes", 4096}};
  for (auto [key, value, expected] : std::initializer_list<std::tuple<const char*, json, const char*>>{
           {"budget", 5, "field 'weight_cache.budget' is 5, expected a string"},
           {"n_phases", 4000000000u, "weight_cache.n_phases is 4000000000, outside 2 to 65538"},
           {"n_phases", 1, "weight_cache.n_phases is 1, outside"},
           {"page_bytes", 0, "weight_cache.page_bytes is 0, outside 1 to 2^30"},
           {"read_bytes_per_s", "fast", "field 'weight_cache.read_bytes_per_s' is \"fast\", expected a rate"},
           {"storage", json::array(), "weight_cache.storage is [], expected an object"}}) {
    json j = run_json;
    j["weight_cache"] = budget;
    j["weight_cache"][key] = value;
    std::ofstream(copy / "run.json", std::ios::trunc) << j.dump();
    msg = error_of(copy.string());
    EXPECT_NE(msg.find(expected), std::string::npos) << key << ": " << msg;
  }
  fs::copy_file(fs::path(run_dir()) / "run.json", copy / "run.json", fs::copy_options::overwrite_existing);
  // A memory-map tensor whose shape does not need its bytes: readers size tables from shapes, so it is refused.
  const json map = read_json(fs::path(run_dir()) / "memory-map.json");
  for (auto [edit, expected] : std::initializer_list<std::pair<void (*)(json&), const char*>>{
           {[](json& t) { t["shape"][1] = 40000000; }, "but its shape needs"},
           {[](json& t) { t["size_bytes"] = t["size_bytes"].get<uint64_t>() + 1; }, "but its shape needs"},
           {[](json& t) { t["shape"][0] = -3; }, "a negative dimension"},
           {[](json& t) { t["shape"] = json::array(); }, "has 0 dimensions"},
           {[](json& t) { t["type"] = "Q9_9"; }, "unknown type 'Q9_9'"}}) {
    json m = map;
    edit(m["tensors"][1]);
    std::ofstream(copy / "memory-map.json", std::ios::trunc) << m.dump();
    msg = error_of(copy.string());
    EXPECT_NE(msg.find(expected), std::string::npos) << msg;
    EXPECT_NE(msg.find(m["tensors"][1]["name"].get<std::string>()), std::string::npos) << msg;
  }
  fs::copy_file(fs::path(run_dir()) / "memory-map.json", copy / "memory-map.json",
                fs::copy_options::overwrite_existing);
  std::ofstream(copy / "trace.bin", std::ios::binary | std::ios::trunc) << "garbage!garbage!garbage!";
  msg = error_of(copy.string());
  EXPECT_NE(msg.find("not a tensortrace trace"), std::string::npos) << msg;
}

// A run killed midway: trace.bin cut inside a record, no run.json. Exporting keeps every complete record and
// says the trace is truncated.
TEST_F(Export, TruncatedTraceExportsWhatIsThere) {
  const fs::path cut = root() / "cut.partial";
  fs::copy(run_dir(), cut, fs::copy_options::recursive);
  fs::remove(cut / "run.json");
  const uint64_t size = fs::file_size(cut / "trace.bin");
  fs::resize_file(cut / "trace.bin", size * 2 / 3);
  RunData r = load_run(cut.string());
  EXPECT_FALSE(r.finished);
  EXPECT_FALSE(r.trace.complete);
  bool said = false;
  for (const auto& w : r.warnings) said |= w.find("trace.bin is truncated") != std::string::npos;
  EXPECT_TRUE(said);
  ASSERT_FALSE(r.trace.ops.empty());
  EXPECT_EQ(r.n_threads(), 2);  // from the spans

  exporter::export_perfetto(r, (cut / "p.json").string());
  const json p = read_json(cut / "p.json");
  EXPECT_EQ(p["otherData"]["trace_complete"], false);
  size_t slices = 0;
  for (const json& e : p["traceEvents"]) slices += e["ph"] == "X" && e["cat"] != "step";
  size_t views = 0;
  for (const auto& o : r.trace.ops) views += o.n_threads == 0;
  EXPECT_EQ(slices, r.trace.spans.size() + views);

  exporter::export_sqlite(r, (cut / "t.sqlite").string());
  Sqlite db((cut / "t.sqlite").string());
  EXPECT_EQ(db.value("SELECT count(*) FROM ops"), static_cast<int64_t>(r.trace.ops.size()));
  EXPECT_EQ(db.text("SELECT value FROM run_info WHERE key = 'trace_complete'"), "0");
  EXPECT_NE(db.text("SELECT value FROM run_info WHERE key = 'trace_note'").find("truncated"), std::string::npos);

  exporter::export_tokens_json(r, (cut / "tj").string());
  const json last = read_json(cut / "tj" / "traces" / fmt::format("token-{:05}.json", r.trace.steps.back().step));
  EXPECT_EQ(last["entries"].size(), r.ops_of_step(r.trace.steps.back().step).size());
}

// A mixture-of-experts run (synth-qwen3moe-256, 3 tokens), made once: its routing in every export.
class ExportMoe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!test::shared_available()) return;
    root_ = new fs::path(fs::temp_directory_path() / ("tt-export-moe-test-" + std::to_string(::getpid())));
    fs::remove_all(*root_);
    fs::create_directories(*root_);
    ExperimentOptions o;
    o.model_path = test::shared_path("models/synth-qwen3moe-256.Q4_K_M.gguf");
    o.prompt = "Once upon a time";
    o.n_predict = 3;
    o.n_threads = 2;
    o.n_ctx = 64;
    o.sampling.temperature = 0;
    o.run_dir = (*root_ / "run").string();
    o.progress = false;
    run_experiment(o, nullptr);
  }
  static void TearDownTestSuite() {
    if (root_) fs::remove_all(*root_);
    delete root_;
    root_ = nullptr;
  }
  void SetUp() override { TT_REQUIRE_SHARED(); }
  static std::string run_dir() { return (*root_ / "run").string(); }
  static fs::path root() { return *root_; }
  static fs::path* root_;
};
fs::path* ExportMoe::root_ = nullptr;

// The SQLite `routing` table is the trace's routing records row for row: one row per (step, layer, token, slot).
TEST_F(ExportMoe, SqliteRoutingTableEqualsTheTrace) {
  const RunData r = load_run(run_dir());
  ASSERT_FALSE(r.trace.routing.empty());
  const std::string out = (root() / "db.sqlite").string();
  exporter::export_sqlite(r, out);
  Sqlite db(out);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db.db,
                               "SELECT step, layer, token_pos, slot, expert, weight, margin FROM routing "
                               "ORDER BY step, layer, token_pos, slot",
                               -1, &st, nullptr),
            SQLITE_OK);
  size_t rows = 0;
  for (const trace::RoutingRecord& x : r.trace.routing)
    for (size_t slot = 0; slot < x.experts.size(); ++slot, ++rows) {
      ASSERT_EQ(sqlite3_step(st), SQLITE_ROW) << "row " << rows;
      EXPECT_EQ(sqlite3_column_int64(st, 0), x.step);
      EXPECT_EQ(sqlite3_column_int64(st, 1), x.layer);
      EXPECT_EQ(sqlite3_column_int64(st, 2), x.token_pos);
      EXPECT_EQ(sqlite3_column_int64(st, 3), static_cast<int64_t>(slot));
      EXPECT_EQ(sqlite3_column_int64(st, 4), x.experts[slot]);
      EXPECT_EQ(sqlite3_column_double(st, 5), static_cast<double>(x.weights[slot])) << "row " << rows;
      EXPECT_EQ(sqlite3_column_double(st, 6), static_cast<double>(x.margin)) << "row " << rows;
    }
  EXPECT_EQ(sqlite3_step(st), SQLITE_DONE) << "more rows than the trace has";
  sqlite3_finalize(st);
  EXPECT_EQ(rows, r.trace.routing.size() * 8);
}

// Every MUL_MAT_ID slice carries its layer's routing of the step; no other op does.
TEST_F(ExportMoe, PerfettoMulMatIdSlicesCarryTheRouting) {
  const RunData r = load_run(run_dir());
  const json j = json::parse(exporter::perfetto_json(r));
  size_t with = 0;
  for (const json& e : j["traceEvents"]) {
    if (e["ph"] != "X" || e["cat"] == "step") continue;
    const json& a = e["args"];
    if (a["op"] != "MUL_MAT_ID") {
      EXPECT_FALSE(a.contains("routing")) << e.dump();
      continue;
    }
    ASSERT_TRUE(a.contains("routing")) << e.dump();
    const auto rows = r.routing_of_layer(a["step"].get<uint32_t>(), a["layer"].get<int>());
    const json& x = a["routing"];
    ASSERT_EQ(x["experts"].size(), rows.size());
    for (size_t t = 0; t < rows.size(); ++t) {
      EXPECT_EQ(x["token_pos"][t], rows[t].token_pos);
      EXPECT_EQ(x["experts"][t].get<std::vector<uint32_t>>(), rows[t].experts);
      EXPECT_EQ(x["weights"][t].get<std::vector<float>>(), rows[t].weights);
      EXPECT_EQ(x["margin"][t].get<float>(), rows[t].margin);
    }
    ++with;
  }
  EXPECT_GT(with, 0u);
}

// tokens-json: every MUL_MAT_ID entry has `expert_ids` (per routed token, the experts in llama.cpp's order).
TEST_F(ExportMoe, TokensJsonMulMatIdEntriesHaveExpertIds) {
  const RunData r = load_run(run_dir());
  const fs::path out = root() / "tokens";
  exporter::export_tokens_json(r, out.string());
  size_t checked = 0;
  for (const trace::StepMarker& m : r.trace.steps) {
    const json t = read_json(out / "traces" / fmt::format("token-{:05}.json", m.step));
    for (const json& e : t["entries"]) {
      if (e["operation_type"] != "MUL_MAT_ID") {
        EXPECT_FALSE(e.contains("expert_ids")) << e["dst_name"];
        continue;
      }
      const auto rows = r.routing_of_layer(m.step, e["layer_id"].get<int>());
      ASSERT_EQ(e["expert_ids"].size(), rows.size());
      ASSERT_FALSE(rows.empty());
      for (size_t k = 0; k < rows.size(); ++k) {
        EXPECT_EQ(e["expert_ids"][k].get<std::vector<uint32_t>>(), rows[k].experts);
        EXPECT_EQ(e["expert_weights"][k].get<std::vector<float>>(), rows[k].weights);
        EXPECT_EQ(e["expert_token_pos"][k], rows[k].token_pos);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3 * 4 * r.trace.steps.size());
}

// A .npy file read back by parsing its format 1.0 header: magic, version, header length, the dict's descr,
// fortran_order and shape; the data must fill the file exactly.
struct Npy {
  std::string descr;
  std::vector<size_t> shape;
  std::string data;
};
Npy read_npy(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Npy n;
  EXPECT_GE(bytes.size(), 10u) << p;
  if (bytes.size() < 10) return n;
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY") << p;
  EXPECT_EQ(bytes[6], 1) << p;
  EXPECT_EQ(bytes[7], 0) << p;
  const size_t hlen = static_cast<uint8_t>(bytes[8]) | static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8;
  EXPECT_LE(10 + hlen, bytes.size()) << p;
  EXPECT_EQ((10 + hlen) % 64, 0u) << "data not 64-byte aligned: " << p;
  const std::string h = bytes.substr(10, hlen);
  EXPECT_EQ(h.back(), '\n') << p;
  const auto field = [&](const std::string& key) {
    const size_t at = h.find("'" + key + "': ");
    EXPECT_NE(at, std::string::npos) << key << " in " << h;
    return at == std::string::npos ? std::string() : h.substr(at + key.size() + 4);
  };
  const std::string d = field("descr");
  n.descr = d.substr(1, d.find('\'', 1) - 1);
  EXPECT_TRUE(field("fortran_order").starts_with("False")) << h;
  const std::string sh = field("shape");
  std::string dims = sh.substr(1, sh.find(')') - 1);
  for (size_t i = 0; i < dims.size();) {
    size_t j = dims.find(',', i);
    if (j == std::string::npos) j = dims.size();
    const std::string v = dims.substr(i, j - i);
    if (v.find_first_not_of(' ') != std::string::npos) n.shape.push_back(std::stoul(v));
    i = j + 1;
  }
  n.data = bytes.substr(10 + hlen);
  size_t elems = 1;
  for (size_t x : n.shape) elems *= x;
  const size_t width = n.descr.empty() ? 0 : static_cast<size_t>(n.descr.back() - '0');
  EXPECT_EQ(n.data.size(), elems * width) << p;
  return n;
}
template <typename T>
T npy_at(const Npy& n, size_t i) {
  T v;
  std::memcpy(&v, n.data.data() + i * sizeof(T), sizeof(T));
  return v;
}

// routing-npy: [tokens, routed layers, top_k] arrays holding every routing record at its (step, position) and
// layer, -1 / 0 where a layer did not route a token (the prompt's last layer: only the last token).
TEST_F(ExportMoe, RoutingNpyHoldsTheTracesRouting) {
  const RunData r = load_run(run_dir());
  const fs::path out = root() / "routing-npy";
  exporter::export_routing_npy(exporter::routing_table(r), out.string());
  const Npy ids = read_npy(out / "expert_ids.npy"), w = read_npy(out / "expert_weights.npy");
  const Npy tok = read_npy(out / "tokens.npy"), lay = read_npy(out / "layers.npy");
  EXPECT_EQ(ids.descr, "<i2");
  EXPECT_EQ(w.descr, "<f4");
  EXPECT_EQ(tok.descr, "<i4");
  EXPECT_EQ(lay.descr, "<i4");
  // 3 steps: the prompt's positions and two generated tokens; 4 routed layers, top 8.
  const size_t n_prompt = r.trace.steps[0].pos_end - r.trace.steps[0].pos_begin;
  ASSERT_EQ(ids.shape, (std::vector<size_t>{n_prompt + 2, 4, 8}));
  EXPECT_EQ(w.shape, ids.shape);
  ASSERT_EQ(tok.shape, (std::vector<size_t>{n_prompt + 2, 2}));
  ASSERT_EQ(lay.shape, std::vector<size_t>{4});
  for (int l = 0; l < 4; ++l) EXPECT_EQ(npy_at<int32_t>(lay, l), l);
  std::map<std::pair<uint32_t, int32_t>, size_t> row;
  for (size_t i = 0; i < tok.shape[0]; ++i) {
    const std::pair<uint32_t, int32_t> t(npy_at<int32_t>(tok, 2 * i), npy_at<int32_t>(tok, 2 * i + 1));
    if (i) {
      EXPECT_LT(std::prev(row.end())->first, t) << "tokens not in execution order";
    }
    row.emplace(t, i);
  }
  std::set<size_t> filled;
  for (const trace::RoutingRecord& x : r.trace.routing) {
    ASSERT_TRUE(row.count({x.step, x.token_pos})) << x.step << " " << x.token_pos;
    const size_t cell = row[{x.step, x.token_pos}] * 4 + x.layer;
    filled.insert(cell);
    for (size_t k = 0; k < 8; ++k) {
      EXPECT_EQ(npy_at<int16_t>(ids, cell * 8 + k), static_cast<int16_t>(x.experts[k]));
      EXPECT_EQ(npy_at<float>(w, cell * 8 + k), x.weights[k]);
    }
  }
  // Every (token, layer) without a record is -1 with weight 0: the prompt's tokens but its last, in the last layer.
  size_t absent = 0;
  for (size_t cell = 0; cell < ids.shape[0] * 4; ++cell) {
    if (filled.count(cell)) continue;
    ++absent;
    EXPECT_EQ(cell % 4, 3u) << "only the last layer leaves tokens out";
    for (size_t k = 0; k < 8; ++k) {
      EXPECT_EQ(npy_at<int16_t>(ids, cell * 8 + k), -1);
      EXPECT_EQ(npy_at<float>(w, cell * 8 + k), 0.0f);
    }
  }
  EXPECT_EQ(absent, n_prompt - 1);
}

// routing-csv: one row per routing record's slot, in token, layer, slot order.
TEST_F(ExportMoe, RoutingCsvHasARowPerSlot) {
  const RunData r = load_run(run_dir());
  const fs::path out = root() / "routing.csv";
  exporter::export_routing_csv(exporter::routing_table(r), out.string());
  std::ifstream f(out);
  std::string line;
  std::getline(f, line);
  EXPECT_EQ(line, "token,step,position,layer,slot,expert,weight");
  std::map<std::tuple<uint32_t, int32_t, int, size_t>, std::pair<uint32_t, float>> rows;
  while (std::getline(f, line)) {
    unsigned token, step, layer, slot, expert;
    int pos;
    float weight;
    ASSERT_EQ(std::sscanf(line.c_str(), "%u,%u,%d,%u,%u,%u,%f", &token, &step, &pos, &layer, &slot, &expert, &weight),
              7)
        << line;
    rows[{step, pos, static_cast<int>(layer), slot}] = {expert, weight};
  }
  size_t slots = 0;
  for (const trace::RoutingRecord& x : r.trace.routing)
    for (size_t k = 0; k < x.experts.size(); ++k, ++slots) {
      const auto it = rows.find({x.step, x.token_pos, x.layer, k});
      ASSERT_NE(it, rows.end());
      EXPECT_EQ(it->second.first, x.experts[k]);
      EXPECT_EQ(it->second.second, x.weights[k]);
    }
  EXPECT_EQ(rows.size(), slots);
}

// A run whose memory map claims more experts per layer than llama.cpp allows is refused before any reader sizes a
// per-(layer, expert) table from it: by the loader where a router says so, by the analysis where expert tensors do.
TEST_F(ExportMoe, ExpertCountsAboveTheLimitAreRefused) {
  const fs::path copy = root() / "many-experts";
  fs::copy(run_dir(), copy, fs::copy_options::recursive);
  json map = read_json(copy / "memory-map.json");
  // Tensor `name` resized to `n` experts in dimension `dim`, its bytes and the file grown to match.
  auto widen = [&](json& m, const std::string& name, size_t dim, int64_t n) {
    for (json& t : m["tensors"])
      if (t["name"] == name) {
        const uint64_t bytes = t["size_bytes"].get<uint64_t>() / t["shape"][dim].get<uint64_t>() * n;
        t["shape"][dim] = n;
        t["size_bytes"] = bytes;
        t["offset_start"] = m["file_size"];
        t["offset_end"] = m["file_size"].get<uint64_t>() + bytes;
        m["file_size"] = t["offset_end"];
        return;
      }
    FAIL() << "no tensor " << name;
  };
  json routers = map;
  widen(routers, "blk.0.ffn_gate_inp.weight", 1, 600);
  std::ofstream(copy / "memory-map.json", std::ios::trunc) << routers.dump();
  try {
    load_run(copy.string());
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the router of layer 0 has 600 experts, above the 512"), std::string::npos)
        << e.what();
  }
  json experts = map;
  widen(experts, "blk.0.ffn_up_exps.weight", 2, 600);
  std::ofstream(copy / "memory-map.json", std::ios::trunc) << experts.dump();
  const RunData r = load_run(copy.string());
  analysis::AnalyzeOptions opt;
  opt.measure_bandwidth = false;
  try {
    analysis::analyze(r, opt);
    ADD_FAILURE() << "analysed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.0.ffn_up_exps.weight: 600 experts, outside the 1 to 512"),
              std::string::npos)
        << e.what();
  }
}

// A dense run has no routing to export: an error naming the run, nothing written.
TEST_F(Export, RoutingExportOfADenseRunIsAnError) {
  const RunData r = load_run(run_dir());
  try {
    exporter::routing_table(r);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no routing records"), std::string::npos) << e.what();
  }
}

// The dense run exports no routing.
TEST_F(Export, DenseRunHasNoRouting) {
  RunData r = load_run(run_dir());
  EXPECT_TRUE(r.trace.routing.empty());
  const std::string out = (root() / "dense-routing.sqlite").string();
  exporter::export_sqlite(r, out);
  Sqlite db(out);
  EXPECT_EQ(db.value("SELECT count(*) FROM routing"), 0);
}

}  // namespace
}  // namespace tt
