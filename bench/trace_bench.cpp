// Per-step work of the tracer that scales with the vocabulary: the logit landscape (top-k and entropy of the full
// softmax) and the readout statistics of the logits. They run between steps, so they add to every generation step.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

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
BENCHMARK(BM_LogitLandscape)->Arg(32000)->Arg(151936);

void BM_ReadoutStats(benchmark::State& state) {
  const std::vector<float> logits = random_logits(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(readout_stats(logits));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ReadoutStats)->Arg(32000);

}  // namespace
}  // namespace tt
