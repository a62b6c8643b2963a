// Per-step work that scales with the vocabulary: the tracer's logit landscape (top-k and entropy of the full
// softmax) and readout statistics of the logits, and the sampler's draw. They run between steps, so they add to
// every generation step.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <vector>

#include "model/engine.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "trace/json_line.h"
#include "trace/trace_file.h"
#include "tracer/landscape.h"
#include "tracer/tracer.h"

namespace tt {
namespace {

// A logit-like vector of n values (normal, sd 4).
std::vector<float> random_logits(int64_t n) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

void BM_LogitLandscape(benchmark::State& state) {
  const std::vector<float> logits = random_logits(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(logit_landscape(logits, 10));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_LogitLandscape)->Arg(512)->Arg(32000)->Arg(151936);

// `run`'s default sampling (top-k 40, top-p 0.95, min-p 0.05, temperature 0.8) with a repetition penalty over 64
// tokens.
void BM_Sample(benchmark::State& state) {
  const std::vector<float> logits = random_logits(state.range(0));
  SamplingParams p;
  p.repeat_penalty = 1.1f;
  p.seed = 1;
  Sampler sampler(p);
  for (int i = 0; i < 64; ++i) sampler.accept(static_cast<int32_t>(i * 37 % state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(sampler.sample(logits));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Sample)->Arg(32000)->Arg(151936);

void BM_ReadoutStats(benchmark::State& state) {
  const std::vector<float> logits = random_logits(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(readout_stats(logits));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ReadoutStats)->Arg(512)->Arg(32000);

void BM_ReadoutHash(benchmark::State& state) {
  const std::vector<float> logits = random_logits(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(readout_hash(logits));
  state.SetBytesProcessed(state.iterations() * state.range(0) * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_ReadoutHash)->Arg(32000)->Arg(151936);

// A steps.jsonl line's fields as the tracer writes them: step, positions, tokens, top-10 (id, text, logit,
// probability), gap, entropy and two readout statistics.
void BM_StepLine(benchmark::State& state) {
  const std::vector<float> logits = random_logits(10);
  JsonLine j;
  for (auto _ : state) {
    j.clear();
    j.begin_object().field("step", 12).field("phase", "GENERATE").field("pos_begin", 12).field("pos_end", 13);
    j.begin_array("input_tokens").value(int32_t{318}).end_array();
    j.field("token", 318).field("token_text", " the").field("probability", 0.25f).field("softmax_probability", 0.2512);
    j.begin_array("top_k");
    for (int i = 0; i < 10; ++i)
      j.begin_object()
          .field("id", 300 + i)
          .field("text", " word")
          .field("logit", logits[i])
          .field("prob", std::exp(static_cast<double>(logits[i]) / 10))
          .end_object();
    j.end_array().field("top1_top2_gap", logits[0] - logits[1]).field("entropy", 2.345678901234);
    for (const char* key : {"hidden_stats", "logits_stats"}) {
      j.key(key).begin_object();
      j.field("min", logits[2]).field("max", logits[3]).field("mean", 0.123456789).field("std", 1.23456789);
      j.field("hash", "0123456789abcdef").end_object();
    }
    j.end_object();
    benchmark::DoNotOptimize(j.str().data());
  }
}
BENCHMARK(BM_StepLine);

// One generation step's op times as the tracer writes them (one OPS record): 252 nodes (TinyLLama-v0)
// on 2 workers, thread 0 running every node, thread 1 a third of them, shares of 40 ns to 20 us.
void BM_TraceWriterOps(benchmark::State& state) {
  constexpr uint32_t kNodes = 252;
  constexpr uint16_t kThreads = 2;
  constexpr int kSteps = 64;  // different times each step, as a run has (the same ones would train the branches)
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> log_ns(5, 14);  // 32 ns to 16 us, spread over the powers of two
  std::vector<std::vector<uint64_t>> steps(kSteps);
  uint64_t now[kThreads] = {1'000'000, 1'000'000};
  for (std::vector<uint64_t>& times : steps)
    for (uint32_t i = 0; i < kNodes; ++i)
      for (uint16_t t = 0; t < kThreads; ++t) {
        if (t > 0 && i % 3 != 0) {
          times.insert(times.end(), {trace::TraceWriter::kNoShareNs, trace::TraceWriter::kNoShareNs});
          continue;
        }
        const uint64_t start = now[t] + (rng() % 4 == 0 ? rng() % 200 : 0);
        now[t] = start + (uint64_t{1} << log_ns(rng)) + rng() % 64;
        times.insert(times.end(), {start, now[t]});
      }
  const std::string path =
      (std::filesystem::temp_directory_path() / ("tt-bench-writer-" + std::to_string(::getpid()))).string();
  {
    trace::TraceWriter writer(path);
    uint32_t step = 0;
    for (auto _ : state) {
      writer.ops({step, 0, kNodes, kThreads}, steps[step % kSteps], {}, kNodes);
      ++step;
      if (writer.bytes_buffered() >= trace::TraceWriter::kFlushBytes) {
        state.PauseTiming();
        writer.flush();
        state.ResumeTiming();
      }
    }
    state.counters["bytes_per_step"] = static_cast<double>(writer.bytes_written()) / std::max<uint32_t>(step, 1);
  }
  std::filesystem::remove(path);
  state.SetItemsProcessed(state.iterations() * kNodes);
}
BENCHMARK(BM_TraceWriterOps);

// The tracer's work around one generation step of a real model (args: 0 stories260K, 1 TinyLLama-v0, 2 the main
// model synth-llama-768 and 3 synth-qwen2-256 from ../shared), without the
// step's compute: the tracer's own time on the run's thread (on_step_begin, on_graph_ready, on_step_end), the part of
// the traced step the untraced one does not have besides the executor's timestamps. 2 threads, as in
// `bench --trace-overhead`.
void BM_TracerStep(benchmark::State& state) {
  const char* files[] = {"models/stories260K.gguf", "models/TinyLLama-v0.Q4_0.gguf",
                         "../shared/models/synth-llama-768.Q4_K_M.gguf", "../shared/models/synth-qwen2-256.Q8_0.gguf"};
  const std::string path = std::string(TT_REPO_DIR "/") + files[state.range(0)];
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("model not found: " + path).c_str());
    return;
  }
  std::unique_ptr<Model> model = load_model(path);
  Engine engine(*model, {256, 2, GgmlType::F16});
  const std::string dir_path =
      (std::filesystem::temp_directory_path() / ("tt-bench-tracer-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir_path);
  RunDirWriter dir(dir_path);  // removed when it goes out of scope (never committed)
  Tracer tracer(dir, *model, TraceOptions{}, engine.pool(), now_ns());
  std::vector<int32_t> token = {1};
  int32_t step = 0;
  // One traced step; returns the tracer's time in it.
  auto traced_step = [&] {
    if (engine.n_past() + 1 >= engine.n_ctx()) engine.reset();
    StepOutcome out;
    out.step = step++;
    out.phase = out.step == 0 ? Phase::PROMPT : Phase::GENERATE;
    out.pos_begin = engine.n_past();
    out.pos_end = out.pos_begin + 1;
    out.input_tokens = token;
    const uint64_t self_before = tracer.self_ticks();
    tracer.on_step_begin(out.step, out.phase, out.pos_begin, out.pos_end);
    out.start_ns = now_ns();
    out.logits = engine.eval(token, &tracer);
    out.end_ns = now_ns();
    out.hidden = engine.hidden();
    out.sampled = {static_cast<int32_t>(out.step % out.logits.size()), 0.5f};
    tracer.on_step_end(out);
    token[0] = out.sampled.token;
    return tracer.self_ticks() - self_before;
  };
  for (int i = 0; i < 3; ++i) traced_step();  // the prompt step and the first generation steps write full records
  // Ticks to seconds at the counter's rate over the benchmark so far (a difference of two self_ns() readings,
  // each converted at its own moment's rate, can come out negative).
  const uint64_t ticks0 = tick_count(), ns0 = now_ns();
  for (auto _ : state) {
    const uint64_t ticks = traced_step();
    const double ns_per_tick = static_cast<double>(now_ns() - ns0) / static_cast<double>(tick_count() - ticks0);
    state.SetIterationTime(static_cast<double>(ticks) * ns_per_tick / 1e9);
  }
}
BENCHMARK(BM_TracerStep)->Arg(0)->Arg(1)->Arg(2)->Arg(3)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tt
