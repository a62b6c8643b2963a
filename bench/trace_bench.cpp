// Per-step work of the tracer that scales with the vocabulary: the logit landscape (top-k and entropy of the full
// softmax). Runs on the run's thread between steps, so it adds directly to every generation step.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "trace/landscape.h"
#include "trace/tracer.h"

namespace tt {
namespace {

void BM_LogitLandscape(benchmark::State& state) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  std::vector<float> logits(static_cast<size_t>(state.range(0)));
  for (float& l : logits) l = dist(rng);
  for (auto _ : state) benchmark::DoNotOptimize(logit_landscape(logits, 10));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_LogitLandscape)->Arg(32000)->Arg(151936);

}  // namespace
}  // namespace tt

namespace tt {
namespace {

void BM_ReadoutStats(benchmark::State& state) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  std::vector<float> v(static_cast<size_t>(state.range(0)));
  for (float& x : v) x = dist(rng);
  for (auto _ : state) benchmark::DoNotOptimize(readout_stats(v));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ReadoutStats)->Arg(32000);

}  // namespace
}  // namespace tt
