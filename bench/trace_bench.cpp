// Per-step work of the tracer that scales with the vocabulary: the logit landscape (top-k and entropy of the full
// softmax) and the readout statistics of the logits. They run between steps, so they add to every generation step.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "trace/json_line.h"
#include "trace/landscape.h"
#include "trace/tracer.h"

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

}  // namespace
}  // namespace tt
