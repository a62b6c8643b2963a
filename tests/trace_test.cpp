// Tracing: every record has the right step, phase, positions and layer; the op sequence of a 2-step run of
// stories260K is llama.cpp's (shared/reference/ops); the run directory is complete and atomic.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <span>
#include <thread>

#include "core/error.h"
#include "model/engine.h"
#include "model/model.h"
#include "quant/quant.h"
#include "support/paths.h"
#include "support/tiny_model.h"
#include "trace/run_data.h"
#include "trace/trace_file.h"
#include "tracer/experiment.h"
#include "tracer/landscape.h"
#include "tracer/tracer.h"

namespace tt {
namespace {

namespace fs = std::filesystem;

using test::TempDir;

ExperimentOptions stories_options(const std::string& run_dir, int n_predict) {
  ExperimentOptions o;
  o.model_path = test::repo_path("models/stories260K.gguf");
  o.prompt = "Once upon a time";
  o.n_predict = n_predict;
  o.n_threads = 2;
  o.sampling.temperature = 0;
  o.run_dir = run_dir;
  o.progress = false;
  return o;
}

TEST(Trace, RecordsCarryStepPhasePositionsAndLayer) {
  TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  ExperimentResult r = run_experiment(stories_options(dir, 4), nullptr);
  ASSERT_EQ(r.run_dir, dir);
  trace::TraceContents t = trace::read_trace(dir + "/trace.bin");
  ASSERT_TRUE(t.complete) << t.stop_reason;
  EXPECT_TRUE(t.routing.empty()) << "a dense model routes nothing";
  const int n_prompt = static_cast<int>(r.prompt_tokens.size());
  ASSERT_EQ(t.steps.size(), 4u);  // prompt + 3 decode steps for 4 chosen tokens
  for (const trace::StepMarker& s : t.steps) {
    EXPECT_EQ(s.phase, s.step == 0 ? Phase::PROMPT : Phase::GENERATE);
    EXPECT_EQ(s.pos_begin, s.step == 0 ? 0 : n_prompt + static_cast<int>(s.step) - 1);
    EXPECT_EQ(s.pos_end, s.step == 0 ? n_prompt : n_prompt + static_cast<int>(s.step));
    EXPECT_EQ(s.token, r.generation.tokens[s.step]);
  }
  std::map<uint32_t, int> ops_per_step;
  const std::regex layer_suffix(".*-([0-9]+)$"), weight_layer("blk\\.([0-9]+)\\..*");
  for (const trace::OpRecord& o : t.ops) {
    ops_per_step[o.step]++;
    const trace::StepMarker& s = t.steps.at(o.step);
    EXPECT_EQ(o.phase, s.phase) << o.name;
    EXPECT_EQ(o.pos_begin, s.pos_begin) << o.name;
    EXPECT_EQ(o.pos_end, s.pos_end) << o.name;
    EXPECT_GE(o.start_ns, s.start_ns) << o.name;
    EXPECT_LE(o.start_ns, o.end_ns) << o.name;
    // The layer agrees with the name's suffix ("Qcur-3") and with any weight it reads ("blk.3.").
    std::smatch m;
    std::string base = o.name.substr(0, o.name.find(' '));
    if (std::regex_match(base, m, layer_suffix)) {
      EXPECT_EQ(o.layer, std::stoi(m[1])) << o.name;
    }
    for (const trace::TensorRecord& in : o.inputs)
      if (std::regex_match(in.name, m, weight_layer)) {
        EXPECT_EQ(o.layer, std::stoi(m[1])) << o.name << " " << in.name;
      }
    // Full names, never cut.
    EXPECT_EQ(o.name.find('\0'), std::string::npos);
  }
  for (const auto& [step, n] : ops_per_step) EXPECT_GT(n, 100) << "step " << step;
  // The embedding lookup reads exactly the prompt's rows of token_embd.
  const trace::OpRecord& embd = t.ops.front();
  ASSERT_EQ(embd.name, "embd");
  uint64_t bytes = 0;
  for (const trace::RangeRecord& rr : embd.inputs[0].ranges) {
    EXPECT_EQ(rr.pool, Pool::MODEL_FILE);
    bytes += rr.length;
  }
  EXPECT_EQ(bytes, static_cast<uint64_t>(n_prompt) * 64 * 4);
  // Files of the run directory.
  for (const char* f : {"run.json", "memory-map.json", "steps.jsonl", "buffers.json", "graphs/index.json"})
    EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  EXPECT_FALSE(fs::exists(dir + ".partial"));
  std::ifstream steps(dir + "/steps.jsonl");
  int lines = 0;
  for (std::string line; std::getline(steps, line); ++lines) {
    nlohmann::json s = nlohmann::json::parse(line);
    EXPECT_EQ(s["step"], lines);
    EXPECT_EQ(s["top_k"].size(), 10u);
    EXPECT_GE(s["entropy"].get<double>(), 0.0);
    EXPECT_FALSE(s.contains("routing")) << "a dense model's lines have no routing field";
  }
  EXPECT_EQ(lines, 4);
  nlohmann::json graphs = nlohmann::json::parse(std::ifstream(dir + "/graphs/index.json"));
  EXPECT_EQ(graphs["graphs"], 2) << "the prompt graph and one graph shared by every decode step";
}

// Drives a tracer by hand over `steps` steps of stories260K on two threads, as generate() does, pausing `pause`
// between each step's evaluation and its end. `caller`: the step's logits are the caller's own (derived from the
// engine's, as a penalty would), its buffer overwritten with NaN right after the step's end. Returns what each
// steps.jsonl line must say (the hash and top-10 of the logits given to on_step_end, as they were then).
struct HandRun {
  std::vector<std::string> hashes;
  std::vector<std::vector<int32_t>> tops;
};
HandRun trace_by_hand(const std::string& dir, int steps, bool caller, std::chrono::microseconds pause) {
  auto model = load_model(test::repo_path("models/stories260K.gguf"));
  Engine engine(*model, {64, 2, GgmlType::F16});
  HandRun run;
  RunDirWriter run_dir(dir);
  Tracer tracer(run_dir, *model, TraceOptions{}, engine.pool(), now_ns());
  std::vector<float> caller_logits;
  std::vector<int32_t> token = {1};
  for (int32_t step = 0; step < steps; ++step) {
    StepOutcome out;
    out.step = step;
    out.phase = step == 0 ? Phase::PROMPT : Phase::GENERATE;
    out.pos_begin = engine.n_past();
    out.pos_end = out.pos_begin + 1;
    out.input_tokens = token;
    tracer.on_step_begin(out.step, out.phase, out.pos_begin, out.pos_end);
    out.start_ns = now_ns();
    out.logits = engine.eval(token, &tracer);
    out.end_ns = now_ns();
    std::this_thread::sleep_for(pause);
    if (caller) {
      caller_logits.assign(out.logits.begin(), out.logits.end());
      for (size_t i = 0; i < caller_logits.size(); ++i) caller_logits[i] = 0.5f * caller_logits[i] + (i % 7 == 0);
      out.logits = caller_logits;
    }
    run.hashes.push_back(fmt::format("{:016x}", readout_hash(out.logits)));
    run.tops.push_back(logit_landscape(out.logits, 10).top);
    out.hidden = engine.hidden();
    out.sampled = {run.tops.back()[0], 0.5f};
    tracer.on_step_end(out);
    std::fill(caller_logits.begin(), caller_logits.end(), NAN);  // the caller reuses its buffer
    token[0] = out.sampled.token;
  }
  tracer.finish();
  run_dir.commit();
  return run;
}

void expect_step_lines(const std::string& dir, const HandRun& run) {
  std::ifstream steps(dir + "/steps.jsonl");
  size_t step = 0;
  for (std::string line; std::getline(steps, line); ++step) {
    ASSERT_LT(step, run.hashes.size());
    const nlohmann::json s = nlohmann::json::parse(line);
    EXPECT_EQ(s["logits_stats"]["hash"], run.hashes[step]) << "step " << step;
    ASSERT_EQ(s["top_k"].size(), 10u);
    for (size_t i = 0; i < 10; ++i)
      EXPECT_EQ(s["top_k"][i]["id"], run.tops[step][i]) << "step " << step << " rank " << i;
    EXPECT_FALSE(std::isnan(s["entropy"].get<double>())) << "step " << step;
  }
  EXPECT_EQ(step, run.hashes.size());
}

// A caller's own logits (not the engine's) are read at the step's end: the step's line describes them as they were,
// though the caller overwrites its buffer right after.
TEST(Trace, CallerLogitsAreCopiedAtTheStepEnd) {
  TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  constexpr int kSteps = 4;
  const HandRun run = trace_by_hand(dir, kSteps, /*caller=*/true, std::chrono::milliseconds(20));
  expect_step_lines(dir, run);
}

// Whatever time passes between a step's run and its end (while the caller samples), the line describes that step's
// logits.
TEST(Trace, LandscapeBegunBetweenRunsIsTheStepsOwn) {
  TempDir tmp;
  constexpr int kSteps = 4;
  for (const auto pause : {std::chrono::microseconds(0), std::chrono::microseconds(20'000)}) {
    const std::string dir = (tmp.path / fmt::format("run-{}", pause.count())).string();
    const HandRun run = trace_by_hand(dir, kSteps, /*caller=*/false, pause);
    expect_step_lines(dir, run);
  }
}

// llama.cpp's op sequence for stories260K, prompt "Once upon a time" (the prompt pass).
// Each steps.jsonl line describes that step's logits exactly: the hash is XXH3-64 of their bytes and the landscape
// (top-k, entropy, moments) is logit_landscape()'s, though the tracer computes them a vocabulary part at a time on
// two threads and hashes the parts in whichever order the threads finish them. TinyLLama-v0's 32,000 logits are
// two parts; the logits are evaluated again here, step by step, with the run's tokens.
TEST(Trace, StepLinesHashAndLandscapeAreTheLogits) {
  TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  ExperimentOptions o = stories_options(dir, 4);
  o.model_path = test::repo_path("models/TinyLLama-v0.Q4_0.gguf");
  ExperimentResult r = run_experiment(o, nullptr);
  ASSERT_GT(landscape_part_count(32000), 1u);

  auto model = load_model(o.model_path);
  Engine engine(*model, {64, 2, GgmlType::F16});
  std::vector<int32_t> input = r.prompt_tokens;
  std::ifstream steps(dir + "/steps.jsonl");
  int step = 0;
  for (std::string line; std::getline(steps, line); ++step) {
    const nlohmann::json s = nlohmann::json::parse(line);
    ASSERT_EQ(s["step"], step);
    const std::span<const float> logits = engine.eval(input);
    ASSERT_EQ(logits.size(), 32000u);
    EXPECT_EQ(s["logits_stats"]["hash"], fmt::format("{:016x}", readout_hash(logits))) << "step " << step;
    const LogitLandscape land = logit_landscape(logits, 10);
    ASSERT_EQ(s["top_k"].size(), 10u);
    for (size_t i = 0; i < 10; ++i) EXPECT_EQ(s["top_k"][i]["id"], land.top[i]) << "step " << step << " rank " << i;
    EXPECT_DOUBLE_EQ(s["entropy"].get<double>(), land.entropy) << "step " << step;
    EXPECT_DOUBLE_EQ(s["logits_stats"]["mean"].get<double>(), land.mean_logit) << "step " << step;
    if (step < static_cast<int>(r.generation.tokens.size())) input.assign(1, r.generation.tokens[step]);
  }
  EXPECT_EQ(step, 4);
}

TEST(Trace, OpSequenceMatchesLlamaCpp) {
  TT_REQUIRE_SHARED();
  std::ifstream ref(test::shared_path("reference/ops/stories260K.eval-callback.txt"));
  const std::regex line_re(R"(common_debug_cb_eval:\s+(.+?) = \(\w+\)\s+(\w+)\()");
  std::vector<std::pair<std::string, std::string>> expected;  // (name, op)
  for (std::string line; std::getline(ref, line);) {
    std::smatch m;
    if (std::regex_search(line, m, line_re)) expected.emplace_back(m[1], m[2]);
  }
  ASSERT_EQ(expected.size(), 161u);

  TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  run_experiment(stories_options(dir, 2), nullptr);
  trace::TraceContents t = trace::read_trace(dir + "/trace.bin");
  std::vector<const trace::OpRecord*> step0, step1;
  for (const trace::OpRecord& o : t.ops) (o.step == 0 ? step0 : step1).push_back(&o);
  ASSERT_EQ(step0.size(), expected.size());
  // Documented name mapping for llama.cpp's unnamed nodes.
  auto ours_for = [](const std::string& ref_name, const std::string& op, int layer) {
    if (ref_name.rfind("node_", 0) != 0) return ref_name;
    if (op == "FLASH_ATTN_EXT") return "fattn-" + std::to_string(layer);
    return std::string();  // the last layer's row selections: checked by op only
  };
  int layer = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& [name, op] = expected[i];
    EXPECT_EQ(op_name(step0[i]->op), op) << "node " << i << " (" << name << ")";
    if (step0[i]->layer >= 0) layer = step0[i]->layer;
    std::string want = ours_for(name, op, layer);
    if (!want.empty()) {
      EXPECT_EQ(step0[i]->name, want) << "node " << i;
    }
  }
  // The decode step: the same sequence without the last layer's two row selections.
  ASSERT_EQ(step1.size(), expected.size() - 2);
  size_t j = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i].first.rfind("node_", 0) == 0 && expected[i].second == "GET_ROWS") continue;
    EXPECT_EQ(op_name(step1[j]->op), expected[i].second) << "decode node " << j;
    ++j;
  }
}

// The weights are read into memory unless the run studies the file (or --mmap asks); the results are the same, and
// so are the file's hash and every recorded byte range, also where the in-memory copy stores Q8_0 matrices in row
// groups (a tiny Q8_0 model).
TEST(Trace, WeightsInMemoryOrMappedGiveTheSameRun) {
  TempDir tmp;
  test::TinyModelSpec q8_0;
  q8_0.n_embd = 64;
  q8_0.n_ff = 96;
  q8_0.matrix_type = GgmlType::Q8_0;
  const std::string q8_0_path = (tmp.path / "tiny-q8_0.gguf").string();
  test::write_tiny_model(q8_0, q8_0_path);
  for (const std::string& model : {test::repo_path("models/stories260K.gguf"), q8_0_path}) {
    SCOPED_TRACE(model);
    const fs::path base = tmp.path / fs::path(model).stem();
    ExperimentOptions o = stories_options((base / "in-memory").string(), 6);
    o.model_path = model;
    const ExperimentResult in_memory = run_experiment(o, nullptr);
    o.run_dir = (base / "mapped").string();
    o.mmap = true;
    const ExperimentResult mapped = run_experiment(o, nullptr);
    EXPECT_EQ(in_memory.run_json["options"]["weights"], "in-memory");
    EXPECT_EQ(mapped.run_json["options"]["weights"], "mapped");
    EXPECT_EQ(in_memory.generation.tokens, mapped.generation.tokens);
    EXPECT_EQ(in_memory.run_json["model"]["xxh64"], mapped.run_json["model"]["xxh64"]);
    const std::string notes = in_memory.run_json["model"]["load_checks"]["notes"].dump();
    const bool grouped = model == q8_0_path && find_kernels(GgmlType::Q8_0)->row_groups.has_value();
    EXPECT_EQ(notes.find("groups of 16 rows") != std::string::npos, grouped) << notes;
    const trace::TraceContents a = trace::read_trace(in_memory.run_dir + "/trace.bin");
    const trace::TraceContents b = trace::read_trace(mapped.run_dir + "/trace.bin");
    ASSERT_EQ(a.ops.size(), b.ops.size());
    std::vector<uint64_t> fa, fb;
    for (size_t i = 0; i < a.ops.size(); ++i) {  // the same file ranges and buffers either way
      trace::placement_fields(a.ops[i], fa);
      trace::placement_fields(b.ops[i], fb);
      ASSERT_EQ(fa, fb) << a.ops[i].name;
    }
    o.run_dir = (base / "cold").string();
    o.mmap = false;
    o.trace_options.io = true;  // page-cache records need the mapping
    EXPECT_EQ(run_experiment(o, nullptr).run_json["options"]["weights"], "mapped");
  }
}

// A model file larger than the memory available is mapped, and the run says why; one that fits is read.
TEST(Trace, WeightsTooLargeForMemoryAreMappedWithANote) {
  std::string why;
  EXPECT_EQ(default_residency(uint64_t{1} << 30, uint64_t{2} << 30, &why), FileResidency::IN_MEMORY);
  EXPECT_TRUE(why.empty()) << why;
  EXPECT_EQ(default_residency(uint64_t{3} << 30, uint64_t{2} << 30, &why), FileResidency::MAPPED);
  EXPECT_NE(why.find("3.00 GiB"), std::string::npos) << why;
  EXPECT_NE(why.find("--mmap"), std::string::npos) << why;
  EXPECT_GT(memory_available(), uint64_t{0});
  EXPECT_EQ(default_residency(test::repo_path("models/stories260K.gguf"), &why), FileResidency::IN_MEMORY);
  // A file that cannot be sized is left to the loader, which names the problem.
  EXPECT_EQ(default_residency("/nonexistent/model.gguf", &why), FileResidency::IN_MEMORY);
}

TEST(Trace, ErrorLeavesNoRunDirectory) {
  TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  ExperimentOptions o = stories_options(dir, 8);
  o.n_ctx = 6;  // 5 prompt tokens + 8 do not fit
  EXPECT_THROW(run_experiment(o, nullptr), Error);
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_FALSE(fs::exists(dir + ".partial"));
}

TEST(Trace, ExistingRunDirectoryIsNotOverwritten) {
  TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  fs::create_directories(dir);
  try {
    run_experiment(stories_options(dir, 1), nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos) << e.what();
  }
}

TEST(Trace, TruncatedTraceIsReadUpToTheLastCompleteRecord) {
  TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  run_experiment(stories_options(dir, 3), nullptr);
  const std::string path = dir + "/trace.bin";
  trace::TraceContents whole = trace::read_trace(path);
  const auto size = fs::file_size(path);
  fs::resize_file(path, size * 2 / 3 + 3);  // cut inside a record
  trace::TraceContents cut = trace::read_trace(path);
  EXPECT_FALSE(cut.complete);
  EXPECT_FALSE(cut.stop_reason.empty());
  EXPECT_GT(cut.ops.size(), 0u);
  EXPECT_LT(cut.ops.size(), whole.ops.size());
  for (size_t i = 0; i < cut.ops.size(); ++i) EXPECT_EQ(cut.ops[i].name, whole.ops[i].name);
}

// OPS records (a node's previous record moved by its stride, or by changes) read back to the same records as whole
// OP records: a greedy run and one with --trace-values (every record whole, with statistics) agree on every field but
// the times and statistics. Past the first steps, cache views advance by their stride, so the trace is a fraction of
// the whole-record one (with two threads the same nodes split the same way in both runs: thread fields agree too).
class OpsTrace : public testing::TestWithParam<int> {};
TEST_P(OpsTrace, ReadsBackAsWholeRecords) {
  const int n_threads = GetParam();
  TempDir tmp;
  trace::TraceContents t[2];
  uint64_t bytes[2];
  for (int whole = 0; whole < 2; ++whole) {
    const std::string dir = (tmp.path / fmt::format("run{}", whole)).string();
    ExperimentOptions o = stories_options(dir, 12);
    o.n_threads = n_threads;
    o.trace_options.values = whole == 1;
    run_experiment(o, nullptr);
    t[whole] = trace::read_trace(dir + "/trace.bin");
    bytes[whole] = fs::file_size(dir + "/trace.bin");
  }
  ASSERT_EQ(t[0].ops.size(), t[1].ops.size());
  EXPECT_LT(bytes[0], bytes[1] / 3) << "trace not a third of the whole-record one";
  auto same_tensor = [](const trace::TensorRecord& a, const trace::TensorRecord& b) {
    bool same = a.name == b.name && a.type == b.type && a.pool == b.pool && a.buffer_id == b.buffer_id &&
                a.offset == b.offset && a.bytes == b.bytes && a.ranges.size() == b.ranges.size();
    for (int d = 0; d < 4; ++d) same = same && a.ne[d] == b.ne[d];
    for (size_t k = 0; same && k < a.ranges.size(); ++k)
      same = a.ranges[k].offset == b.ranges[k].offset && a.ranges[k].length == b.ranges[k].length &&
             a.ranges[k].pos_begin == b.ranges[k].pos_begin && a.ranges[k].pos_end == b.ranges[k].pos_end &&
             a.ranges[k].pool == b.ranges[k].pool && a.ranges[k].buffer_id == b.ranges[k].buffer_id;
    return same;
  };
  for (size_t i = 0; i < t[0].ops.size(); ++i) {
    const trace::OpRecord &a = t[0].ops[i], &b = t[1].ops[i];
    bool same = a.step == b.step && a.node == b.node && a.phase == b.phase && a.op == b.op && a.layer == b.layer &&
                a.pos_begin == b.pos_begin && a.pos_end == b.pos_end && a.thread == b.thread &&
                a.n_threads == b.n_threads && a.name == b.name && same_tensor(a.out, b.out) &&
                a.write.offset == b.write.offset && a.write.length == b.write.length &&
                a.write.pos_begin == b.write.pos_begin && a.write.pos_end == b.write.pos_end &&
                a.write.pool == b.write.pool && a.write.buffer_id == b.write.buffer_id &&
                a.inputs.size() == b.inputs.size();
    for (size_t k = 0; same && k < a.inputs.size(); ++k) same = same_tensor(a.inputs[k], b.inputs[k]);
    ASSERT_TRUE(same) << "op " << i << " (step " << a.step << ", node " << a.node << ", " << a.name
                      << ") differs between the trace and the whole-record one";
    EXPECT_FALSE(a.has_stats);
  }
}
INSTANTIATE_TEST_SUITE_P(Threads, OpsTrace, testing::Values(1, 2));

// Reading the trace at path fails with a message containing `expected`.
void expect_rejected(const std::string& path, const std::string& expected) {
  try {
    trace::read_trace(path);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    return;
  }
  ADD_FAILURE() << "accepted; expected: " << expected;
}

trace::StepMarker step_marker(uint32_t s, bool ended) {
  const auto p = static_cast<int32_t>(s);
  return {s, Phase::GENERATE, p, p + 1, 10 * s, ended ? 10 * s + 5 : 0, ended ? 7 : -1, ended ? 0.5f : 0, ended};
}

// Handcrafted OPS records: a move changes a node's previous record and sets its stride, a later OPS record adds the
// stride again (a cache read growing one position a step), a move of no changes stops it; records take their step's
// phase and positions; records that refer to nothing or lie outside their step are errors naming it.
TEST(TraceFormat, MoveSetsStrideAndOpsAdvanceByIt) {
  TempDir tmp;
  const std::string path = (tmp.path / "trace.bin").string();
  trace::OpRecord r;
  r.op = OpKind::MUL_MAT;
  r.inputs.resize(1);
  r.inputs[0].pool = Pool::KV_CACHE;
  r.inputs[0].ranges = {{Pool::KV_CACHE, 0, 0, 128, 0, 1}};
  std::vector<uint64_t> fields;
  trace::placement_fields(r, fields);
  // Index of the range's length and pos_end: 9 output tensor fields, 6 write range fields, 9 input tensor fields,
  // then the range (pool, buffer, offset, length, pos_begin, pos_end).
  constexpr uint32_t kLength = 27, kPosEnd = 29;
  ASSERT_EQ(fields.size(), 30u);
  ASSERT_EQ(fields[kLength], 128u);
  auto write = [&](auto&& records) {
    trace::TraceWriter w(path);
    const uint32_t ids[3] = {w.intern("kq-0"), w.intern("kq-0"), w.intern("cache_k_l0 (view)")};
    records(w, ids);
    w.flush();
  };
  const uint64_t times[5][2] = {{10, 20}, {1000, 1010}, {2000, 2010}, {3000, 3010}, {4000, 4010}};
  using Changes = std::vector<std::pair<uint32_t, uint64_t>>;
  const Changes grow = {{kLength, 128}, {kPosEnd, 1}}, none;
  write([&](trace::TraceWriter& w, const uint32_t* ids) {
    w.step_begin(step_marker(0, false));
    w.op(r, ids, times[0]);
    w.step_end(step_marker(0, true));
    for (uint32_t s = 1; s < 5; ++s) {
      w.step_begin(step_marker(s, false));
      std::vector<trace::TraceWriter::Moved> moved;
      if (s == 1) moved.push_back({0, grow});
      if (s == 4) moved.push_back({0, none});
      w.ops({s, 0, 1, 1}, times[s], moved, 1);
      w.step_end(step_marker(s, true));
    }
  });
  const trace::TraceContents t = trace::read_trace(path);
  ASSERT_EQ(t.ops.size(), 5u);
  for (uint32_t s = 0; s < 5; ++s) {
    SCOPED_TRACE(fmt::format("step {}", s));
    const trace::RangeRecord& x = t.ops[s].inputs.at(0).ranges.at(0);
    const uint32_t grown = std::min(s, 3u) + 1;  // step 4 stopped moving
    EXPECT_EQ(t.ops[s].step, s);
    EXPECT_EQ(t.ops[s].pos_begin, static_cast<int32_t>(s));
    EXPECT_EQ(t.ops[s].pos_end, static_cast<int32_t>(s + 1));
    EXPECT_EQ(t.ops[s].phase, Phase::GENERATE);
    EXPECT_EQ(x.length, 128u * grown);
    EXPECT_EQ(x.pos_end, static_cast<int32_t>(grown));
    EXPECT_EQ(x.offset, 0u);
    EXPECT_EQ(t.ops[s].inputs[0].name, "cache_k_l0 (view)");
    EXPECT_EQ(t.ops[s].start_ns, times[s][0]);
    EXPECT_EQ(t.ops[s].end_ns, times[s][1]);
  }
  EXPECT_EQ(t.spans.size(), 5u);

  auto rejected = [&](const std::string& expected) { expect_rejected(path, expected); };
  const uint64_t share[] = {0, 10};
  write([&](trace::TraceWriter& w, const uint32_t*) {
    w.step_begin(step_marker(0, false));
    w.ops({0, 5, 1, 1}, share, {}, 1);
  });
  rejected("OPS of node 5 (step 0) before any OP record of that node");
  write([&](trace::TraceWriter& w, const uint32_t* ids) {
    w.step_begin(step_marker(0, false));
    w.op(r, ids, share);
    const Changes bad = {{99, 1}};
    const trace::TraceWriter::Moved moved[] = {{0, bad}};
    w.ops({0, 0, 1, 1}, share, moved, 1);
  });
  rejected("change to field 99 of node 0, which has 30");
  write([&](trace::TraceWriter& w, const uint32_t* ids) { w.op(r, ids, share); });
  rejected("op record of step 0 outside that step's STEP_BEGIN and STEP_END");
  write([&](trace::TraceWriter& w, const uint32_t* ids) {
    w.step_begin(step_marker(0, false));
    w.step_end(step_marker(0, true));
    w.op(r, ids, share);
  });
  rejected("op record of step 0 outside that step's STEP_BEGIN and STEP_END");
  write([&](trace::TraceWriter& w, const uint32_t* ids) {
    w.step_begin(step_marker(0, false));
    r.node = 1u << 30;
    w.op(r, ids, share);
  });
  rejected("node index 1073741824 beyond any graph");
  write([&](trace::TraceWriter& w, const uint32_t* ids) {
    w.step_begin(step_marker(0, false));
    r.node = trace::kMaxNodes;  // the first index past the bound: would cost a record slot per index up to it
    w.op(r, ids, share);
  });
  rejected("node index 65536 beyond any graph (65536 nodes at most)");
  r.node = 0;
  write([&](trace::TraceWriter& w, const uint32_t* ids) {
    w.step_begin(step_marker(0, false));
    w.op(r, ids, share);
    w.ops({0, 0, 1, 0}, {}, {}, 0);  // nodes of no workers: no bytes per node
  });
  rejected("shares of 0 workers (1 to 1024)");
  // Enumerations outside their range (consumers look their names up): an unknown pool and an unknown tensor type.
  for (const auto& [patch, expected] : {std::pair<int, std::string>{0, "unknown buffer pool 9"},
                                        std::pair<int, std::string>{1, "unknown tensor type 200"}}) {
    trace::OpRecord bad = r;
    if (patch == 0) bad.inputs[0].ranges[0].pool = static_cast<Pool>(9);
    if (patch == 1) bad.out.type = static_cast<GgmlType>(200);
    write([&](trace::TraceWriter& w, const uint32_t* ids) {
      w.step_begin(step_marker(0, false));
      w.op(bad, ids, share);
    });
    rejected(expected);
  }
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void write_file(const std::string& path, std::span<const uint8_t> bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}
// Offsets of the blocks of a trace file (each header's length leads to the next).
std::vector<size_t> block_offsets(std::span<const uint8_t> file) {
  std::vector<size_t> blocks;
  for (size_t pos = trace::kHeaderBytes; pos + trace::kBlockHeaderBytes <= file.size();) {
    blocks.push_back(pos);
    uint32_t len;
    std::memcpy(&len, file.data() + pos + 4, 4);
    pos += trace::kBlockHeaderBytes + len;
  }
  return blocks;
}
// The records of a trace file: its blocks' payloads, in order.
std::vector<uint8_t> records_of(std::span<const uint8_t> file) {
  std::vector<uint8_t> records;
  for (size_t pos : block_offsets(file)) {
    uint32_t len;
    std::memcpy(&len, file.data() + pos + 4, 4);
    const auto begin = file.begin() + static_cast<std::ptrdiff_t>(pos + trace::kBlockHeaderBytes);
    records.insert(records.end(), begin, begin + len);
  }
  return records;
}

// Little-endian record bytes built by hand (records the writer does not write: corrupt ones).
struct RecordBytes {
  std::vector<uint8_t> payload;
  template <typename T>
  RecordBytes& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    payload.insert(payload.end(), p, p + sizeof(T));
    return *this;
  }
  RecordBytes& varint(uint64_t v) {
    uint8_t bytes[trace::kMaxVarintBytes];
    payload.insert(payload.end(), bytes, trace::put_varint(bytes, v));
    return *this;
  }
  // The start of an OPS record of step 1: `count` nodes from node 0, none moved, then the shares' header.
  static RecordBytes ops(uint32_t count, uint16_t n_workers, uint64_t base) {
    RecordBytes b;
    b.put<uint32_t>(1).put<uint32_t>(0).put<uint32_t>(count).varint(0);
    b.put<uint16_t>(n_workers).put<uint64_t>(base);
    return b;
  }
  // Appends the record to the records of the file at path (written by TraceWriter), in one block.
  void append_to(const std::string& path, trace::RecordKind kind) const {
    const std::vector<uint8_t> file = file_bytes(path);
    std::vector<uint8_t> records = records_of(file);
    const auto n = static_cast<uint32_t>(payload.size());
    const auto k = static_cast<uint8_t>(kind);
    records.insert(records.end(), reinterpret_cast<const uint8_t*>(&n), reinterpret_cast<const uint8_t*>(&n) + 4);
    records.push_back(k);
    records.insert(records.end(), payload.begin(), payload.end());
    std::vector<uint8_t> out(file.begin(), file.begin() + trace::kHeaderBytes);
    trace::seal_block(records, out);
    write_file(path, out);
  }
};

// The shares' varint times read back exactly: shares starting where the worker's previous one ended, after a gap,
// before it (a counter read behind on another core), lasting over 2^32 ns, and workers without a share. Corrupt
// varints and counts past the record are errors.
TEST(TraceFormat, SharesReadBackExactly) {
  TempDir tmp;
  const std::string path = (tmp.path / "trace.bin").string();
  trace::OpRecord r;
  r.op = OpKind::MUL_MAT;
  // Step 0's two OP records and step 1 begun; then an OPS record of both nodes with `times` (none: left open).
  auto write = [&](std::span<const uint64_t> times) {
    trace::TraceWriter w(path);
    const uint32_t ids[2] = {w.intern("ffn_out-0"), w.intern("ffn_out-0")};
    w.step_begin(step_marker(0, false));
    const uint64_t share[] = {0, 10, trace::TraceWriter::kNoShareNs, trace::TraceWriter::kNoShareNs};
    for (uint32_t node = 0; node < 2; ++node) {
      r.node = node;
      w.op(r, ids, share);
    }
    w.step_end(step_marker(0, true));
    w.step_begin(step_marker(1, false));
    if (!times.empty()) w.ops({1, 0, 2, 2}, times, {}, 3);
    w.flush();
  };
  // What the OPS record's two nodes (ops 2 and 3) read back as: each op's (thread, n_threads, start, end) and each
  // span's (thread, 0, start, end).
  using Times = std::array<uint64_t, 4>;
  auto expect_read_back = [&](std::span<const uint64_t> times, const std::array<Times, 2>& ops,
                              const std::vector<Times>& spans) {
    write(times);
    const trace::TraceContents t = trace::read_trace(path);
    ASSERT_EQ(t.ops.size(), 4u);
    for (size_t k = 0; k < 2; ++k) {
      const trace::OpRecord& o = t.ops[2 + k];
      EXPECT_EQ((Times{o.thread, o.n_threads, o.start_ns, o.end_ns}), ops[k]) << "op " << 2 + k;
    }
    ASSERT_EQ(t.spans.size(), 2 + spans.size());  // step 0's, then the OPS record's
    for (size_t k = 0; k < spans.size(); ++k) {
      const trace::SpanRecord& s = t.spans[2 + k];
      EXPECT_EQ((Times{s.thread, 0, s.start_ns, s.end_ns}), spans[k]) << "span " << k;
    }
  };
  constexpr uint64_t kNo = trace::TraceWriter::kNoShareNs, kLong = 6'000'000'000;
  // [node][worker] (start, end)
  const uint64_t times[] = {5000, 5100, 5020, 5090, 5100, 5100 + kLong, kNo, kNo};
  expect_read_back(times, {Times{0, 2, 5000, 5100}, Times{0, 1, 5100, 5100 + kLong}},
                   {{0, 0, 5000, 5100}, {1, 0, 5020, 5090}, {0, 0, 5100, 5100 + kLong}});
  // Worker 1 starts node 1 before its node-0 share ended (negative gap), worker 0 has none of node 0.
  const uint64_t behind[] = {kNo, kNo, 7000, 7500, 9000, 9400, 7400, 7600};
  expect_read_back(behind, {Times{1, 1, 7000, 7500}, Times{0, 2, 7400, 9400}},
                   {{1, 0, 7000, 7500}, {0, 0, 9000, 9400}, {1, 0, 7400, 7600}});

  using K = trace::RecordKind;
  auto rejected = [&](const RecordBytes& b, const std::string& expected) {
    write({});
    b.append_to(path, K::OPS);
    expect_rejected(path, expected);
  };
  RecordBytes too_long = RecordBytes::ops(1, 1, 0);
  for (int k = 0; k < 10; ++k) too_long.put<uint8_t>(0xFF);
  too_long.put<uint8_t>(1);
  rejected(too_long, "varint longer than 64 bits");
  RecordBytes cut = RecordBytes::ops(1, 1, 0);
  cut.varint(3).put<uint8_t>(0x80);  // a duration whose last byte is missing
  rejected(cut, "record payload shorter than its fields");
  RecordBytes many = RecordBytes::ops(1000, 2, 0);
  many.varint(0).varint(0);
  rejected(many, "1000 nodes exceed the record");
  RecordBytes workers = RecordBytes::ops(1, 2000, 0);
  rejected(workers, "shares of 2000 workers (1 to 1024)");
  RecordBytes overflow = RecordBytes::ops(1, 1, UINT64_MAX - 5);
  overflow.varint(1).varint(10);
  rejected(overflow, "node 0: worker 0's share ends past 2^64 ns");
  RecordBytes extra = RecordBytes::ops(1, 1, 0);
  extra.varint(1).varint(5).put<uint8_t>(0);
  rejected(extra, "OPS record has 1 bytes past its fields");
  // The moved nodes: in order, inside the run, with their changed fields in order.
  auto moved = [](std::initializer_list<uint64_t> entries) {
    RecordBytes b;
    b.put<uint32_t>(1).put<uint32_t>(0).put<uint32_t>(2);
    for (uint64_t v : entries) b.varint(v);
    return b;
  };
  rejected(moved({3}), "3 moved nodes in a run of 2");
  rejected(moved({2, 2, 0, 0}), "moved node 2 of a run of 2 out of order");
  rejected(moved({2, 1, 0, 1, 0, 0}), "moved node 1 of a run of 2 out of order");
  rejected(moved({1, 0, 2, 5, 1, 5, 1}), "changed field 5 of node 0 out of order");
  rejected(moved({1, 0, 200}), "200 changes exceed the record");
  RecordBytes past_nodes = RecordBytes::ops(70000, 1, 0);
  past_nodes.payload[4] = 0xFF, past_nodes.payload[5] = 0xFF;  // first node 65535: past kMaxNodes with the count
  rejected(past_nodes, "OPS record of nodes 65535 to 135535 (65536 nodes at most)");
}

// A trace of another version is refused by name (older ones encode op records otherwise); an OP record with bytes
// past its fields is corrupt.
TEST(TraceFormat, OtherVersionsAreRefusedByName) {
  TempDir tmp;
  const std::string path = (tmp.path / "trace.bin").string();
  for (uint32_t version : {1u, trace::kVersion - 1, trace::kVersion + 1}) {
    { trace::TraceWriter w(path); }
    std::vector<uint8_t> bytes = file_bytes(path);
    std::memcpy(bytes.data() + 8, &version, 4);
    write_file(path, bytes);
    expect_rejected(path, version < trace::kVersion
                              ? fmt::format("trace format version {} was written by an older tensortrace; this one "
                                            "reads version {}",
                                            version, trace::kVersion)
                              : fmt::format("trace format version {} is newer than this tensortrace reads", version));
  }
  trace::OpRecord r;
  r.op = OpKind::MUL_MAT;
  r.node = 3;
  {
    trace::TraceWriter w(path);
    const uint32_t ids[2] = {w.intern("ffn_out-0"), w.intern("ffn_out-0")};
    w.step_begin(step_marker(0, false));
    const uint64_t share[] = {0, 10};
    w.op(r, ids, share);
  }
  const std::vector<uint8_t> file = file_bytes(path);
  std::vector<uint8_t> records = records_of(file);
  // The OP record is the last one: two more payload bytes.
  size_t at = 0, last = 0;
  while (at < records.size()) {
    uint32_t len;
    std::memcpy(&len, records.data() + at, 4);
    last = at;
    at += 5 + len;
  }
  uint32_t len;
  std::memcpy(&len, records.data() + last, 4);
  len += 2;
  std::memcpy(records.data() + last, &len, 4);
  records.push_back(0), records.push_back(0);
  std::vector<uint8_t> out(file.begin(), file.begin() + trace::kHeaderBytes);
  trace::seal_block(records, out);
  write_file(path, out);
  expect_rejected(path, "OP record of node 3 has 2 bytes past its fields");
}

// Blocks: a trace of three steps, each flushed (sealed) on its own, and its blocks' offsets.
struct BlockedTrace {
  std::string path;
  std::vector<uint8_t> bytes;
  std::vector<size_t> blocks;
};
BlockedTrace write_blocked_trace(const fs::path& dir) {
  BlockedTrace b{(dir / "trace.bin").string(), {}, {}};
  {
    trace::TraceWriter w(b.path);
    for (uint32_t s = 0; s < 3; ++s) {
      const auto p = static_cast<int32_t>(s);
      w.step_begin({s, Phase::GENERATE, p, p + 1, 10 * s, 0, -1, 0, false});
      w.step_end({s, Phase::GENERATE, p, p + 1, 10 * s, 10 * s + 5, 7, 0.5f, true});
      w.flush();
    }
  }
  b.bytes = file_bytes(b.path);
  b.blocks = block_offsets(b.bytes);
  return b;
}

// Each flush is one block (magic, length, XXH3-64 of its records) and the blocks tile the file; every record reads
// back. A file put together by seal_block reads the same.
TEST(TraceBlocks, MultiBlockFileRoundTrips) {
  TempDir tmp;
  const BlockedTrace b = write_blocked_trace(tmp.path);
  ASSERT_EQ(b.blocks.size(), 3u);
  size_t end = trace::kHeaderBytes;
  for (size_t pos : b.blocks) {
    uint32_t magic, len;
    std::memcpy(&magic, b.bytes.data() + pos, 4);
    std::memcpy(&len, b.bytes.data() + pos + 4, 4);
    EXPECT_EQ(pos, end);
    EXPECT_EQ(magic, trace::kBlockMagic);
    EXPECT_EQ(len, 51u) << "a STEP_BEGIN (26 bytes) and a STEP_END (25)";
    end = pos + trace::kBlockHeaderBytes + len;
  }
  EXPECT_EQ(end, b.bytes.size());
  const trace::TraceContents t = trace::read_trace(b.path);
  EXPECT_EQ(t.version, trace::kVersion);
  EXPECT_TRUE(t.complete) << t.stop_reason;
  EXPECT_EQ(t.stopped_at, b.bytes.size());
  ASSERT_EQ(t.steps.size(), 3u);
  for (uint32_t s = 0; s < 3; ++s) {
    EXPECT_EQ(t.steps[s].step, s);
    EXPECT_EQ(t.steps[s].end_ns, 10 * s + 5);
    EXPECT_EQ(t.steps[s].token, 7);
  }

  // The same records in two blocks of seal_block's.
  const std::vector<uint8_t> records = records_of(b.bytes);
  std::vector<uint8_t> resealed(b.bytes.begin(), b.bytes.begin() + trace::kHeaderBytes);
  trace::seal_block(std::span(records).first(26), resealed);
  trace::seal_block(std::span(records).subspan(26), resealed);
  write_file(b.path, resealed);
  const trace::TraceContents t2 = trace::read_trace(b.path);
  EXPECT_TRUE(t2.complete) << t2.stop_reason;
  EXPECT_EQ(t2.steps.size(), 3u);
}

// A flipped bit in any block's records is an error naming the file, the block's offset and the checksum.
TEST(TraceBlocks, FlippedPayloadBitNamesItsBlock) {
  TempDir tmp;
  const BlockedTrace b = write_blocked_trace(tmp.path);
  ASSERT_EQ(b.blocks.size(), 3u);
  for (size_t pos : b.blocks)
    for (size_t at : {pos + trace::kBlockHeaderBytes, pos + trace::kBlockHeaderBytes + 40}) {
      std::vector<uint8_t> bytes = b.bytes;
      bytes[at] ^= 0x08;
      write_file(b.path, bytes);
      SCOPED_TRACE(fmt::format("bit 3 of byte {}", at));
      expect_rejected(b.path, fmt::format("'{}': checksum mismatch in the block at byte {}", b.path, pos));
    }
}

// A flipped bit in a block's header: its magic, its length (shorter, longer, or past the end of the file with the next
// block behind it) or its checksum is an error naming the block's offset.
TEST(TraceBlocks, FlippedHeaderBitNamesItsBlock) {
  TempDir tmp;
  const BlockedTrace b = write_blocked_trace(tmp.path);
  ASSERT_EQ(b.blocks.size(), 3u);
  auto flipped = [&](size_t at, uint8_t mask, const std::string& expected) {
    std::vector<uint8_t> bytes = b.bytes;
    bytes[at] ^= mask;
    write_file(b.path, bytes);
    SCOPED_TRACE(fmt::format("byte {} ^ {:#x}", at, mask));
    expect_rejected(b.path, expected);
  };
  for (size_t pos : {b.blocks[0], b.blocks[1]}) {
    const std::string mismatch = fmt::format("checksum mismatch in the block at byte {}", pos);
    flipped(pos, 0x01, fmt::format("'{}': no block at byte {} (magic", b.path, pos));
    flipped(pos + 3, 0x80, fmt::format("no block at byte {}", pos));
    flipped(pos + 4, 0x01, mismatch);  // 50 bytes of records
    flipped(pos + 4, 0x04, mismatch);  // 55
    flipped(pos + 6, 0x10, fmt::format("the block at byte {} runs past the end of the file", pos));
    flipped(pos + 8, 0x01, mismatch);
    flipped(pos + 15, 0x80, mismatch);
  }
}

// A file cut inside its last block (a killed run), in the block's header or its records, reads every whole record
// before the cut and says where it stopped.
TEST(TraceBlocks, CutLastBlockReadsItsWholeRecords) {
  TempDir tmp;
  const BlockedTrace b = write_blocked_trace(tmp.path);
  ASSERT_EQ(b.blocks.size(), 3u);
  const size_t last = b.blocks[2], records = last + trace::kBlockHeaderBytes;
  for (size_t size = last + 1; size < b.bytes.size(); ++size) {
    write_file(b.path, std::span(b.bytes).first(size));
    SCOPED_TRACE(fmt::format("cut at byte {}", size));
    const trace::TraceContents t = trace::read_trace(b.path);
    EXPECT_FALSE(t.complete);
    EXPECT_NE(t.stop_reason.find(fmt::format("file ends inside the block at byte {}", last)), std::string::npos)
        << t.stop_reason;
    // The last block's STEP_BEGIN (26 bytes) is read once it is whole.
    ASSERT_EQ(t.steps.size(), size >= records + 26 ? 3u : 2u);
    EXPECT_TRUE(t.steps[1].ended);
    EXPECT_EQ(t.stopped_at, size < records ? last : size < records + 26 ? records : records + 26);
  }
}

// A checksummed block whose records end inside a record is corrupt (records never straddle blocks).
TEST(TraceBlocks, BlockEndingInsideARecordIsCorrupt) {
  TempDir tmp;
  const BlockedTrace b = write_blocked_trace(tmp.path);
  const std::vector<uint8_t> records = records_of(b.bytes);
  std::vector<uint8_t> bytes(b.bytes.begin(), b.bytes.begin() + trace::kHeaderBytes);
  trace::seal_block(std::span(records).first(40), bytes);
  trace::seal_block(std::span(records).subspan(40), bytes);
  write_file(b.path, bytes);
  expect_rejected(b.path, fmt::format("'{}': the block at byte 16 ends inside a record", b.path));
}

// reseal_blocks (the fuzzers' helper) makes an edited file's checksums right again: the edit reads back.
TEST(TraceBlocks, ResealedEditReadsBack) {
  TempDir tmp;
  const BlockedTrace b = write_blocked_trace(tmp.path);
  std::vector<uint8_t> bytes = b.bytes;
  // Step 1's STEP_END token: after its STEP_BEGIN (26 bytes), the record header (5), step (4) and end_ns (8).
  const size_t token = b.blocks[1] + trace::kBlockHeaderBytes + 26 + 5 + 4 + 8;
  ASSERT_EQ(bytes[token], 7);
  bytes[token] = 9;
  trace::reseal_blocks(bytes);
  write_file(b.path, bytes);
  const trace::TraceContents t = trace::read_trace(b.path);
  ASSERT_EQ(t.steps.size(), 3u);
  EXPECT_EQ(t.steps[1].token, 9);
  EXPECT_EQ(t.steps[2].token, 7);
}

// With two workers, every op's thread, worker count and times read back from a trace (runs of nodes in OPS records)
// agree with its spans: one span per worker that ran part of a computing op,
// the op lasting from the first span's start to the last span's end.
TEST(Trace, SpansAgreeWithOps) {
  TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  run_experiment(stories_options(dir, 8), nullptr);  // two workers
  const trace::TraceContents t = trace::read_trace(dir + "/trace.bin");
  EXPECT_EQ(t.version, trace::kVersion);
  size_t s = 0, views = 0, repeated_steps = 0;
  for (const trace::OpRecord& op : t.ops) {
    uint64_t start = UINT64_MAX, end = 0;
    int n = 0, first = -1;
    for (; s < t.spans.size() && t.spans[s].step == op.step && t.spans[s].node == op.node; ++s, ++n) {
      if (first < 0) first = t.spans[s].thread;
      start = std::min(start, t.spans[s].start_ns);
      end = std::max(end, t.spans[s].end_ns);
      EXPECT_LE(t.spans[s].start_ns, t.spans[s].end_ns);
    }
    SCOPED_TRACE(fmt::format("step {} node {} {}", op.step, op.node, op.name));
    if (op_is_view(op.op)) {
      ++views;
      EXPECT_EQ(n, 0);
      EXPECT_EQ(op.n_threads, 0);
      continue;
    }
    ASSERT_EQ(n, op.n_threads);
    ASSERT_GT(n, 0);
    EXPECT_EQ(op.thread, first);
    EXPECT_EQ(op.start_ns, start);
    EXPECT_EQ(op.end_ns, end);
    const trace::StepMarker& m = t.steps.at(op.step);
    EXPECT_GE(op.start_ns, m.start_ns);
    EXPECT_LE(op.end_ns, m.end_ns);
    repeated_steps += op.step > 1;
  }
  EXPECT_EQ(s, t.spans.size()) << "spans without their op";
  EXPECT_GT(views, 0u);
  EXPECT_GT(repeated_steps, 0u);
}

// The buffer timeline (buffers.json) is assembled at the end from node times kept per step: every activation
// event lies within its step's evaluation, every step has its events, and the scratch file is gone.
TEST(Trace, BufferTimelineEventsLieInTheirSteps) {
  TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  run_experiment(stories_options(dir, 8), nullptr);  // two workers
  EXPECT_FALSE(fs::exists(fs::path(dir) / "buffer-times.tmp"));
  std::vector<nlohmann::json> steps;
  std::ifstream lines(dir + "/steps.jsonl");
  for (std::string line; std::getline(lines, line);) steps.push_back(nlohmann::json::parse(line));
  ASSERT_GE(steps.size(), 8u);
  const nlohmann::json b = nlohmann::json::parse(std::ifstream(dir + "/buffers.json"));
  std::vector<int> per_step(steps.size(), 0);
  for (const auto& e : b["events"]) {
    if (e[3] != "ACTIVATION") continue;
    const size_t step = e[1].get<size_t>();
    ASSERT_LT(step, steps.size());
    ++per_step[step];
    const uint64_t t = e[0].get<uint64_t>();
    EXPECT_GE(t, steps[step]["start_ns"].get<uint64_t>()) << e.dump();
    EXPECT_LE(t, steps[step]["end_ns"].get<uint64_t>()) << e.dump();
  }
  for (size_t s = 0; s < per_step.size(); ++s) EXPECT_GT(per_step[s], 0) << "step " << s;
}

TEST(Trace, ValuesAndCheckFinite) {
  TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  ExperimentOptions o = stories_options(dir, 2);
  o.trace_options.values = true;
  o.trace_options.check_finite = true;
  run_experiment(o, nullptr);
  trace::TraceContents t = trace::read_trace(dir + "/trace.bin");
  int with_stats = 0, computed = 0;
  for (const trace::OpRecord& r : t.ops) {
    if (!op_is_view(r.op)) ++computed;
    if (!r.has_stats) continue;
    ++with_stats;
    EXPECT_EQ(r.stats.nan_count, 0u) << r.name;
    EXPECT_LE(r.stats.min, r.stats.max) << r.name;
    EXPECT_NE(r.stats.hash, 0u) << r.name;
  }
  EXPECT_EQ(with_stats, computed) << "every computing op has statistics";
  EXPECT_GT(computed, 100);
}

// ROUTING records read back exactly; a record whose expert count or length is wrong is an error naming the record's
// offset.
TEST(TraceFormat, RoutingRecordsRoundTrip) {
  TempDir tmp;
  const std::string path = (tmp.path / "trace.bin").string();
  {
    trace::TraceWriter w(path);
    const int32_t experts[2][3] = {{5, 0, 63}, {7, 1, 2}};
    const float weights[2][3] = {{0.5f, 0.25f, 0.125f}, {1.0f / 3, 1e-7f, -0.0f}};
    w.routing(2, 0, 11, experts[0], weights[0], 0.0625f);
    w.routing(2, 3, 12, experts[1], weights[1], 0.0f);
    w.flush();
  }
  const trace::TraceContents t = trace::read_trace(path);
  EXPECT_EQ(t.version, trace::kVersion);
  ASSERT_EQ(t.routing.size(), 2u);
  const trace::RoutingRecord& a = t.routing[0];
  EXPECT_EQ(a.step, 2u);
  EXPECT_EQ(a.layer, 0u);
  EXPECT_EQ(a.token_pos, 11);
  EXPECT_EQ(a.experts, (std::vector<uint32_t>{5, 0, 63}));
  EXPECT_EQ(a.weights, (std::vector<float>{0.5f, 0.25f, 0.125f}));
  EXPECT_EQ(a.margin, 0.0625f);
  EXPECT_EQ(t.routing[1].layer, 3u);
  EXPECT_EQ(t.routing[1].weights[0], 1.0f / 3);
  EXPECT_EQ(t.routing[1].weights[1], 1e-7f);

  // Hand-made records: u32 step, u16 layer, i32 token_pos, u8 k, k x (u32 expert, f32 weight), f32 margin.
  auto record = [](uint8_t k, size_t pairs) {
    RecordBytes b;
    b.put<uint32_t>(0).put<uint16_t>(1).put<int32_t>(4).put<uint8_t>(k);
    for (size_t i = 0; i < pairs; ++i) b.put<uint32_t>(static_cast<uint32_t>(i)).put<float>(0.5f);
    b.put<float>(0.01f);
    return b;
  };
  auto rejected = [&](const RecordBytes& b, const std::string& expected) {
    { trace::TraceWriter w(path); }
    b.append_to(path, trace::RecordKind::ROUTING);
    // The record is the first of the first block (after the file's and the block's headers).
    expect_rejected(path, "corrupt record at byte 32: " + expected);
  };
  rejected(record(0, 0), "ROUTING record of 0 experts (1 to 64)");
  rejected(record(65, 65), "ROUTING record of 65 experts (1 to 64)");
  rejected(record(255, 1), "ROUTING record of 255 experts (1 to 64)");
  rejected(record(4, 3), "ROUTING record of 4 experts is 39 bytes, expected 47");
  rejected(record(2, 3), "ROUTING record of 2 experts is 39 bytes, expected 31");
}

// A real mixture-of-experts run (synth-qwen3moe-256: 4 layers, 8 of 64 experts a token), traced once for the suite,
// against the engine's own routing from an untraced run of the same tokens.
class MoeTrace : public ::testing::Test {
 protected:
  static constexpr const char* kModel = "synth-qwen3moe-256.Q4_K_M";
  struct Row {
    uint32_t step;
    int layer;
    int32_t token_pos;
    std::vector<uint32_t> experts;
    std::vector<float> weights;
    float margin;
  };
  static void SetUpTestSuite() {
    if (!test::shared_available()) return;
    tmp_ = new TempDir;
    ExperimentOptions o;
    o.model_path = test::shared_path(fmt::format("models/{}.gguf", kModel));
    o.prompt = "Once upon a time there was";
    o.n_predict = 4;
    o.n_threads = 2;
    o.n_ctx = 64;
    o.sampling.temperature = 0;
    o.run_dir = (tmp_->path / "run").string();
    o.progress = false;
    result_ = new ExperimentResult(run_experiment(o, nullptr));
    // The engine's routing (Engine::routing(), what generate() hands observers) on an untraced run.
    struct Capture : GenerateObserver {
      std::vector<Row> rows;
      std::vector<std::vector<WorkerSpan>> slots;  // the executor's span slots (unused)
      void on_graph_ready(const Graph& g, const AllocPlan&) override {
        slots.assign(4, std::vector<WorkerSpan>(g.nodes().size()));
      }
      WorkerSpan* span_slots(int thread) override { return slots.at(thread).data(); }
      void on_step_end(const StepOutcome& out) override {
        for (const LayerRouting& l : out.routing)
          for (int64_t t = 0; t < l.n_tokens(); ++t) {
            Row r{static_cast<uint32_t>(out.step),
                  l.layer,
                  out.pos_end - static_cast<int32_t>(l.n_tokens() - t),
                  {},
                  {},
                  l.margin(t)};
            for (int64_t s = 0; s < l.n_used(); ++s) {
              r.experts.push_back(static_cast<uint32_t>(l.expert(t, s)));
              r.weights.push_back(l.weight(t, s));
            }
            rows.push_back(std::move(r));
          }
      }
    } capture;
    auto model = load_model(o.model_path);
    Engine engine(*model, {o.n_ctx, o.n_threads, o.kv_type, o.llamacpp_build});
    GenerateOptions g;
    g.prompt_tokens = result_->prompt_tokens;
    g.n_predict = o.n_predict;
    g.sampling = o.sampling;
    generate(engine, g, &capture, nullptr);
    expected_ = new std::vector<Row>(std::move(capture.rows));
  }
  static void TearDownTestSuite() {
    delete expected_;
    delete result_;
    delete tmp_;
    expected_ = nullptr, result_ = nullptr, tmp_ = nullptr;
  }
  void SetUp() override { TT_REQUIRE_SHARED(); }
  static std::string run_dir() { return result_->run_dir; }
  static TempDir* tmp_;
  static ExperimentResult* result_;
  static std::vector<Row>* expected_;
};
TempDir* MoeTrace::tmp_ = nullptr;
ExperimentResult* MoeTrace::result_ = nullptr;
std::vector<MoeTrace::Row>* MoeTrace::expected_ = nullptr;

// The trace's ROUTING records, as tt::load_run gives them, are Engine::routing() row for row, bit for bit.
TEST_F(MoeTrace, RoutingEqualsTheEngines) {
  const RunData run = load_run(run_dir());
  const std::vector<trace::RoutingRecord>& got = run.trace.routing;
  ASSERT_EQ(got.size(), expected_->size());
  // 4 layers: the prompt's tokens in the first three, its last token in the last; one token a layer after.
  const size_t n_prompt = result_->prompt_tokens.size();
  EXPECT_EQ(got.size(), 3 * n_prompt + 1 + 4 * (run.trace.steps.size() - 1));
  for (size_t i = 0; i < got.size(); ++i) {
    const Row& want = (*expected_)[i];
    EXPECT_EQ(got[i].step, want.step) << i;
    EXPECT_EQ(got[i].layer, want.layer) << i;
    EXPECT_EQ(got[i].token_pos, want.token_pos) << i;
    EXPECT_EQ(got[i].experts, want.experts) << i;
    EXPECT_EQ(got[i].weights, want.weights) << i;
    EXPECT_EQ(got[i].margin, want.margin) << i;
    EXPECT_EQ(got[i].experts.size(), 8u);
  }
  for (const trace::StepMarker& m : run.trace.steps)
    EXPECT_EQ(run.routing_of_layer(m.step, 3).size(), 1u) << "the last layer routes one token, step " << m.step;
}

// steps.jsonl's `routing` field: per layer, the first routed position and each token's experts, as the trace has them.
TEST_F(MoeTrace, StepLinesCarryTheRouting) {
  const RunData run = load_run(run_dir());
  ASSERT_EQ(run.steps.size(), run.trace.steps.size());
  for (const RunStep& s : run.steps) {
    ASSERT_TRUE(s.json.contains("routing")) << "step " << s.step;
    const nlohmann::json& layers = s.json["routing"];
    ASSERT_EQ(layers.size(), 4u);
    for (const nlohmann::json& l : layers) {
      const auto rows = run.routing_of_layer(s.step, l["layer"].get<int>());
      ASSERT_EQ(l["experts"].size(), rows.size());
      EXPECT_EQ(l["pos_begin"], rows.front().token_pos);
      for (size_t t = 0; t < rows.size(); ++t) EXPECT_EQ(l["experts"][t].get<std::vector<uint32_t>>(), rows[t].experts);
    }
  }
}

// tt::load_run checks ROUTING records against the model: a layer without a router, an expert past the router's count,
// or rows out of (layer, position) order are errors naming the record.
TEST_F(MoeTrace, LoaderChecksRoutingAgainstTheModel) {
  // The byte offset of the first ROUTING record's payload in trace.bin (records are in blocks).
  const std::vector<uint8_t> bytes = file_bytes(run_dir() + "/trace.bin");
  size_t first = 0;
  for (size_t block : block_offsets(bytes)) {
    uint32_t block_len;
    std::memcpy(&block_len, bytes.data() + block + 4, 4);
    const size_t end = block + trace::kBlockHeaderBytes + block_len;
    for (size_t pos = block + trace::kBlockHeaderBytes; first == 0 && pos + 5 <= end;) {
      uint32_t len;
      std::memcpy(&len, bytes.data() + pos, 4);
      if (bytes[pos + 4] == static_cast<uint8_t>(trace::RecordKind::ROUTING)) first = pos + 5;
      pos += 5 + len;
    }
  }
  ASSERT_GT(first, 0u);
  // A copy of the run with `n` bytes of `value` at payload offset `at` of the first ROUTING record, its block resealed.
  auto patched = [&](const std::string& name, size_t at, auto value) {
    const std::string dir = (tmp_->path / name).string();
    fs::copy(run_dir(), dir, fs::copy_options::recursive);
    std::vector<uint8_t> edited = bytes;
    std::memcpy(edited.data() + first + at, &value, sizeof(value));
    trace::reseal_blocks(edited);
    write_file(dir + "/trace.bin", edited);
    return dir;
  };
  auto rejected = [](const std::string& dir, const std::string& expected) {
    try {
      load_run(dir);
      ADD_FAILURE() << "accepted; expected: " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  // Payload: u32 step, u16 layer, i32 token_pos, u8 k, then (u32 expert, f32 weight) pairs.
  rejected(patched("expert", 11, uint32_t{64}),
           "routing record of step 0 layer 0 names expert 64, past the layer's 64 experts");
  rejected(patched("layer", 4, uint16_t{7}),
           "routing record of step 0 layer 7, which has no router (blk.7.ffn_gate_inp.weight) in the model");
  rejected(patched("order", 6, int32_t{100}), "routing record of step 0 layer 0 position 1 after layer 0 position 100");
}

// Each MUL_MAT_ID reads exactly the slabs of the experts its layer's tokens chose (each once, in expert order), as
// llama.cpp's memory map (shared/reference/memory-map) places them: expert e of a 3-D tensor is its e-th
// size_bytes / n_expert bytes.
TEST_F(MoeTrace, MulMatIdReadsExactlyTheChosenExpertsSlabs) {
  const RunData run = load_run(run_dir());
  const nlohmann::json map =
      nlohmann::json::parse(std::ifstream(test::shared_path(fmt::format("reference/memory-map/{}.json", kModel))));
  std::map<std::string, nlohmann::json> tensors;
  for (const nlohmann::json& t : map["tensors"]) tensors[t["name"]] = t;
  int checked = 0;
  for (const trace::OpRecord& o : run.trace.ops) {
    if (o.op != OpKind::MUL_MAT_ID) continue;
    ASSERT_EQ(tensors.count(o.inputs.at(0).name), 1u) << o.inputs[0].name;
    const nlohmann::json& t = tensors[o.inputs[0].name];
    const uint64_t n_expert = t["shape"][2], slab = t["size_bytes"].get<uint64_t>() / n_expert;
    std::set<uint32_t> chosen;
    for (const trace::RoutingRecord& x : run.routing_of_layer(o.step, o.layer))
      chosen.insert(x.experts.begin(), x.experts.end());
    ASSERT_FALSE(chosen.empty()) << o.name << " step " << o.step;
    std::vector<std::pair<uint64_t, uint64_t>> want, got;
    for (uint32_t e : chosen) want.emplace_back(t["offset_start"].get<uint64_t>() + e * slab, slab);
    for (const trace::RangeRecord& r : o.inputs[0].ranges) {
      EXPECT_EQ(r.pool, Pool::MODEL_FILE);
      got.emplace_back(r.offset, r.length);
    }
    EXPECT_EQ(got, want) << o.name << " step " << o.step;
    ++checked;
  }
  EXPECT_EQ(checked, 3 * 4 * static_cast<int>(run.trace.steps.size()));  // up, gate, down of 4 layers a step
}

}  // namespace
}  // namespace tt
