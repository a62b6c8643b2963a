// The thread pool's fixed costs, paid regardless of the work: one run() (a job handed to every worker and waited
// for; the engine runs one per step, the tracer one after it) and one barrier() (every executed node ends with one).
#include <benchmark/benchmark.h>

#include "exec/thread_pool.h"

namespace tt {
namespace {

void BM_PoolRun(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  int sink = 0;
  for (auto _ : state) pool.run([&](int ith) { benchmark::DoNotOptimize(sink += ith); });
}
BENCHMARK(BM_PoolRun)->Arg(2);

// 1000 barriers inside one run(): the time a node's barrier costs when the threads arrive together.
void BM_PoolBarrier(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  constexpr int kBarriers = 1000;
  for (auto _ : state)
    pool.run([&](int) {
      for (int i = 0; i < kBarriers; ++i) pool.barrier();
    });
  state.SetItemsProcessed(state.iterations() * kBarriers);
}
BENCHMARK(BM_PoolBarrier)->Arg(2);

}  // namespace
}  // namespace tt
