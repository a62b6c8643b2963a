// Tracing: every record has the right step, phase, positions and layer; the op sequence of a 2-step run of
// stories260K is llama.cpp's (shared/reference/ops); the run directory is complete and atomic.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "core/error.h"
#include "model/engine.h"
#include "model/model.h"
#include "support/paths.h"
#include "trace/trace_file.h"
#include "tracer/experiment.h"
#include "tracer/landscape.h"
#include "tracer/tracer.h"

namespace tt {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("tt-trace-test-" + std::to_string(::getpid()) + "-" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

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
  }
  EXPECT_EQ(lines, 4);
  nlohmann::json graphs = nlohmann::json::parse(std::ifstream(dir + "/graphs/index.json"));
  EXPECT_EQ(graphs["graphs"], 2) << "the prompt graph and one graph shared by every decode step";
}

// Drives a tracer by hand over `steps` steps of stories260K on two threads, as generate() does, pausing `pause`
// between each step's evaluation and its end (the other thread begins the step's landscape and hash between runs
// meanwhile). `caller`: the step's logits are the caller's own (derived from the engine's, as a penalty would), its
// buffer overwritten with NaN right after the step's end. Returns what each steps.jsonl line must say (the hash and
// top-10 of the logits given to on_step_end, as they were then) and run.json's trace counts.
struct HandRun {
  std::vector<std::string> hashes;
  std::vector<std::vector<int32_t>> tops;
  nlohmann::json counts;
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
  run.counts = tracer.finish();
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

// A caller's own logits are copied at the step's end: the step's line describes them as they were, though the
// caller overwrites its buffer before the writer thread formats the line.
TEST(Trace, CallerLogitsAreCopiedAtTheStepEnd) {
  TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  constexpr int kSteps = 4;
  const HandRun run = trace_by_hand(dir, kSteps, /*caller=*/true, std::chrono::milliseconds(20));
  expect_step_lines(dir, run);
}

// The line describes the step's own logits, whether the caller goes straight on or pauses before the step's end.
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
// (top-k, entropy, moments) is logit_landscape()'s. TinyLLama-v0's 32,000 logits are two landscape parts; the
// logits are evaluated again here, step by step, with the run's tokens.
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
  run_experiment(stories_options(dir, 24), nullptr);  // several blocks
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

// The offsets of a trace's blocks (after its header), from their headers.
std::vector<uint64_t> block_offsets(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<uint64_t> at;
  for (uint64_t pos = trace::kHeaderBytes; pos + trace::kBlockHeaderBytes <= bytes.size();) {
    at.push_back(pos);
    uint32_t stored;
    std::memcpy(&stored, bytes.data() + pos + 8, 4);
    pos += trace::kBlockHeaderBytes + stored;
  }
  return at;
}

// A flipped bit anywhere in a block (its header or its payload) is an error naming the block's byte offset.
TEST(TraceFormat, FlippedBitNamesItsBlock) {
  TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  run_experiment(stories_options(dir, 24), nullptr);
  const std::string path = dir + "/trace.bin";
  const std::vector<uint64_t> blocks = block_offsets(path);
  ASSERT_GE(blocks.size(), 2u);
  const std::string copy = (tmp.path / "flipped.bin").string();
  for (const uint64_t at : {blocks[1] + 5, blocks[1] + trace::kBlockHeaderBytes + 40, blocks[0] + 17}) {
    fs::copy_file(path, copy, fs::copy_options::overwrite_existing);
    std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char c;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(static_cast<std::streamoff>(at));
    f.write(&c, 1);
    f.close();
    const uint64_t block = at >= blocks[1] ? blocks[1] : blocks[0];
    expect_rejected(copy, fmt::format("block at byte {}", block));
  }
}

// A last block cut short (a killed run) is reported as truncated, not corrupt, and every block before it is read.
TEST(TraceFormat, TruncatedLastBlockStillReads) {
  TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  run_experiment(stories_options(dir, 24), nullptr);
  const std::string path = dir + "/trace.bin";
  const trace::TraceContents whole = trace::read_trace(path);
  const std::vector<uint64_t> blocks = block_offsets(path);
  ASSERT_GE(blocks.size(), 2u);
  fs::resize_file(path, blocks.back() + trace::kBlockHeaderBytes + 7);
  const trace::TraceContents cut = trace::read_trace(path);
  EXPECT_FALSE(cut.complete);
  EXPECT_EQ(cut.stopped_at, blocks.back());
  EXPECT_NE(cut.stop_reason.find(fmt::format("block at byte {}", blocks.back())), std::string::npos) << cut.stop_reason;
  EXPECT_GT(cut.ops.size(), 0u);
  EXPECT_LT(cut.ops.size(), whole.ops.size());
}

// Records built by hand into a trace (records the writer does not write: corrupt ones).
struct RecordBytes {
  std::vector<uint8_t> payload;
  template <typename T>
  RecordBytes& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    payload.insert(payload.end(), p, p + sizeof(T));
    return *this;
  }
  // Appends the record, sealed in a block of its own, to the file at path, whose header then says `version`.
  void append_to(const std::string& path, trace::RecordKind kind, uint32_t version) const {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    f.write(reinterpret_cast<const char*>(&version), 4);
    f.seekp(0, std::ios::end);
    std::vector<uint8_t> record;
    const auto n = static_cast<uint32_t>(payload.size());
    record.insert(record.end(), reinterpret_cast<const uint8_t*>(&n), reinterpret_cast<const uint8_t*>(&n) + 4);
    record.push_back(static_cast<uint8_t>(kind));
    record.insert(record.end(), payload.begin(), payload.end());
    std::vector<uint8_t> block;
    trace::seal_block(record, block);
    f.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(block.size()));
    ASSERT_TRUE(f.good()) << path;
  }
};

// Each worker's share reads back exactly from an OP record: the op's thread (first share), worker count (0 for a
// view) and times (first start to last end), one span per share of a computing op, shares lasting over 2^32 ns.
// Corrupt records, versions 3 to 6 (whose records depend on earlier ones) and enumerations out of range are errors
// naming them.
TEST(TraceFormat, SharesReadBackExactly) {
  TempDir tmp;
  const std::string path = (tmp.path / "trace.bin").string();
  trace::OpRecord r;
  r.op = OpKind::MUL_MAT;
  auto write = [&](std::span<const trace::Share> node0, std::span<const trace::Share> node1) {
    trace::TraceWriter w(path);
    const uint32_t ids[1] = {w.intern("ffn_out-0")};
    r.node = 0;
    w.op(r, ids, node0);
    r.node = 1;
    w.op(r, ids, node1);
    w.flush();
  };
  using Times = std::array<uint64_t, 4>;
  constexpr uint64_t kLong = 6'000'000'000;
  const trace::Share node0[] = {{0, 5000, 5100}, {1, 5020, 5090}}, node1[] = {{0, 5100, 5100 + kLong}};
  write(node0, node1);
  trace::TraceContents t = trace::read_trace(path);
  EXPECT_EQ(t.version, trace::kVersion);
  ASSERT_EQ(t.ops.size(), 2u);
  EXPECT_EQ((Times{t.ops[0].thread, t.ops[0].n_threads, t.ops[0].start_ns, t.ops[0].end_ns}),
            (Times{0, 2, 5000, 5100}));
  EXPECT_EQ((Times{t.ops[1].thread, t.ops[1].n_threads, t.ops[1].start_ns, t.ops[1].end_ns}),
            (Times{0, 1, 5100, 5100 + kLong}));
  EXPECT_EQ(t.ops[1].name, "ffn_out-0");
  ASSERT_EQ(t.spans.size(), 3u);
  EXPECT_EQ((Times{t.spans[1].thread, t.spans[1].node, t.spans[1].start_ns, t.spans[1].end_ns}),
            (Times{1, 0, 5020, 5090}));
  r.op = OpKind::VIEW;  // a view: thread 0's instant, no span
  const trace::Share instant[] = {{0, 7000, 7000}};
  write(instant, {});
  t = trace::read_trace(path);
  ASSERT_EQ(t.ops.size(), 2u);
  EXPECT_EQ((Times{t.ops[0].thread, t.ops[0].n_threads, t.ops[0].start_ns, t.ops[0].end_ns}),
            (Times{0, 0, 7000, 7000}));
  EXPECT_EQ(t.ops[1].n_threads, 0);
  EXPECT_TRUE(t.spans.empty());
  r.op = OpKind::MUL_MAT;

  auto rejected = [&](const RecordBytes& b, trace::RecordKind kind, uint32_t version, const std::string& expected) {
    write({}, {});
    b.append_to(path, kind, version);
    expect_rejected(path, expected);
  };
  using K = trace::RecordKind;
  for (uint32_t v : {3u, 4u, 5u, 6u})
    rejected(RecordBytes(), K::STEP_END, v, fmt::format("trace.bin version {} is no longer read; re-run", v));
  RecordBytes span;
  span.put<uint32_t>(0).put<uint32_t>(0).put<uint16_t>(0).put<uint64_t>(1).put<uint64_t>(2);
  rejected(span, K::SPAN, 7, "SPAN record in a version 7 trace");
  RecordBytes backwards;  // step 0, node 0, PROMPT, MUL_MAT, layer -1, positions 0-1, one share ending before it starts
  backwards.put<uint32_t>(0).put<uint32_t>(0).put<uint8_t>(0).put<uint8_t>(4).put<int16_t>(-1).put<int32_t>(0);
  backwards.put<int32_t>(1).put<uint16_t>(1).put<uint16_t>(0).put<uint64_t>(10).put<uint64_t>(5);
  rejected(backwards, K::OP, 7, "node 0: worker 0's share ends before it starts");
  RecordBytes many = backwards;
  many.payload.resize(22);
  many.payload[20] = 0xE8, many.payload[21] = 0x03;  // 1000 shares
  rejected(many, K::OP, 7, "1000 shares exceed the record");
  rejected(RecordBytes().put<uint32_t>(0), static_cast<K>(42), 7, "unknown record kind 42");
  // Enumerations outside their range (consumers look their names up): an unknown pool and an unknown tensor type.
  r.inputs.resize(1);
  r.inputs[0].ranges = {{Pool::KV_CACHE, 0, 0, 128, 0, 1}};
  for (const auto& [patch, expected] : {std::pair<int, std::string>{0, "unknown buffer pool 9"},
                                        std::pair<int, std::string>{1, "unknown tensor type 200"}}) {
    trace::OpRecord bad = r;
    if (patch == 0) bad.inputs[0].ranges[0].pool = static_cast<Pool>(9);
    if (patch == 1) bad.out.type = static_cast<GgmlType>(200);
    {
      trace::TraceWriter w(path);
      const uint32_t ids[2] = {w.intern("kq-0"), w.intern("cache_k_l0 (view)")};
      w.op(bad, ids, {});
    }
    expect_rejected(path, expected);
  }
}

// With two workers, every op's thread, worker count and times agree with its spans: one span per worker that ran
// part of a computing op, the op lasting from the first span's start to the last span's end.
TEST(Trace, CompactTraceSpansAgreeWithOps) {
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

}  // namespace
}  // namespace tt
