// Each op's kernel on small hand-computed cases, and the builder's always-on bounds and shape checks.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/error.h"
#include "core/work_split.h"
#include "exec/allocator.h"
#include "exec/executor.h"
#include "exec/thread_pool.h"
#include "graph/builder.h"
#include "graph/kernels.h"
#include "quant/quant.h"

namespace tt {
namespace {

// A graph whose leaf tensors hold given floats; run() places activations and executes with n threads.
struct OpHarness {
  Graph g;
  GraphBuilder b{g};
  std::vector<std::vector<float>> storage;
  AlignedBuffer arena, scratch;

  Tensor* leaf(const std::string& name, std::initializer_list<int64_t> ne, std::vector<float> values) {
    storage.push_back(std::move(values));
    Tensor* t = g.new_tensor(name, GgmlType::F32, ne, -1, Pool::INPUT);
    t->data = reinterpret_cast<uint8_t*>(storage.back().data());
    t->buffer_id = 100 + static_cast<int>(storage.size());
    TT_CHECK(static_cast<size_t>(t->n_elements()) == storage.back().size(), "leaf size");
    g.buffers.push_back({t->buffer_id, Pool::INPUT, name, t->data, storage.back().size() * 4});
    return t;
  }
  // min_parallel_work 0: every node split over the threads (what the multi-thread kernel tests exercise).
  void run(const std::vector<const Tensor*>& keep, int threads = 1, uint64_t min_parallel_work = 0,
           ExecObserver* observer = nullptr) {
    AllocPlan plan = plan_activations(g, keep);
    arena.reserve(plan.arena_bytes);
    scratch.reserve(max_scratch_bytes(g) + 64);
    g.buffers.push_back({1, Pool::ACTIVATION, "activations", arena.data(), arena.size()});
    bind_activation_data(g, arena.data(), 1);
    resolve_ranges(g, 0);
    ThreadPool pool(threads);
    Executor(pool, min_parallel_work).run(g, scratch.data(), observer);
  }
};

std::vector<float> values(const Tensor* t) { return {t->as<float>(), t->as<float>() + t->n_elements()}; }

TEST(Ops, RmsNorm) {
  OpHarness h;
  Tensor* x = h.leaf("x", {2, 2}, {3, 4, 1, 1});
  Tensor* y = h.b.rms_norm(x, 0.0f, "norm");
  h.run({y});
  // mean of squares 12.5 -> 1/sqrt(12.5); row 2: mean 1 -> unchanged.
  std::vector<float> v = values(y);
  EXPECT_NEAR(v[0], 3 / std::sqrt(12.5f), 1e-6);
  EXPECT_NEAR(v[1], 4 / std::sqrt(12.5f), 1e-6);
  EXPECT_NEAR(v[2], 1.0f, 1e-6);
  EXPECT_NEAR(v[3], 1.0f, 1e-6);
}

TEST(Ops, MulAddBroadcastAndSwiglu) {
  OpHarness h;
  Tensor* a = h.leaf("a", {2, 2}, {1, 2, 3, 4});
  Tensor* w = h.leaf("w", {2}, {10, -1});
  Tensor* m = h.b.mul(a, w, "m");
  Tensor* s = h.b.add(a, w, "s");
  Tensor* g = h.b.swiglu(a, a, "sw");
  h.run({m, s, g});
  EXPECT_EQ(values(m), (std::vector<float>{10, -2, 30, -4}));
  EXPECT_EQ(values(s), (std::vector<float>{11, 1, 13, 3}));
  // silu(x) * x
  std::vector<float> sw = values(g);
  for (int i = 0; i < 4; ++i) {
    float x = static_cast<float>(i + 1);
    EXPECT_NEAR(sw[i], x / (1 + std::exp(-x)) * x, 1e-5) << i;
  }
}

TEST(Ops, MulMatF32AllThreadCounts) {
  for (int threads : {1, 2, 3}) {
    OpHarness h;
    // W rows: [1,2,3], [0,1,0], [-1,0,1]; x rows [1,1,1], [2,0,-1]
    Tensor* w = h.leaf("w", {3, 3}, {1, 2, 3, 0, 1, 0, -1, 0, 1});
    Tensor* x = h.leaf("x", {3, 2}, {1, 1, 1, 2, 0, -1});
    Tensor* y = h.b.mul_mat(w, x, "y");
    h.run({y}, threads);
    EXPECT_EQ(values(y), (std::vector<float>{6, 1, 0, -1, 0, -3})) << threads << " threads";
  }
}

// Enough rows for many work chunks, taken by 1, 2 and 3 threads from the shared counter, in graphs of several
// matrix products (the executor alternates two counters): every output is the exact integer product whichever
// thread computed it, and each chunk is computed once (a row computed twice or skipped would show).
TEST(Ops, MulMatChunksCoverEveryRowOnceAllThreadCounts) {
  constexpr int64_t K = 4, N = 300, M = 3;
  std::vector<float> wv(K * N), xv(K * M);
  for (int64_t i = 0; i < K * N; ++i) wv[i] = static_cast<float>(i % 7) - 3;
  for (int64_t i = 0; i < K * M; ++i) xv[i] = static_cast<float>(i % 5) - 2;
  std::vector<float> want(N * M);
  for (int64_t t = 0; t < M; ++t)
    for (int64_t r = 0; r < N; ++r) {
      float sum = 0;
      for (int64_t k = 0; k < K; ++k) sum += wv[r * K + k] * xv[t * K + k];
      want[t * N + r] = sum;
    }
  for (int threads : {1, 2, 3}) {
    OpHarness h;
    Tensor* w = h.leaf("w", {K, N}, wv);
    Tensor* x = h.leaf("x", {K, M}, xv);
    std::vector<Tensor*> ys;
    for (int i = 0; i < 5; ++i) ys.push_back(h.b.mul_mat(w, x, "y" + std::to_string(i)));
    h.run({ys.begin(), ys.end()}, threads);
    for (Tensor* y : ys) EXPECT_EQ(values(y), want) << y->name << ", " << threads << " threads";
  }
}

// The shrinking schedule covers every unit once, in order, with chunks that never grow; the first round (each
// thread's unclaimed first chunk) holds about half of the units, the last ones at most two min_units,
// and there are few chunks: a few rounds past log2(n / min_units).
TEST(WorkSplit, ShrinkingChunksCoverEveryUnitOnceAndShrink) {
  for (int64_t n : {1, 2, 3, 7, 19, 128, 1000, 2000, 100003})
    for (int nth : {1, 2, 3, 8})
      for (int64_t min_units : {int64_t{0}, int64_t{1}, int64_t{2}, n / 64, n / 8}) {
        ShrinkingChunks chunks{n, nth, min_units};
        const int64_t floor = std::max<int64_t>(1, min_units);
        std::vector<int64_t> sizes;
        int64_t next = 0;
        for (int64_t c = 0;; ++c) {
          const Range r = chunks.chunk(c);
          if (r.begin == r.end) {
            EXPECT_EQ(r.begin, n);
            EXPECT_EQ(chunks.chunk(c + 5).begin, n);  // and every chunk after it
            break;
          }
          ASSERT_EQ(r.begin, next) << "n " << n << " nth " << nth << " chunk " << c;
          ASSERT_LT(r.begin, r.end);
          sizes.push_back(r.end - r.begin);
          next = r.end;
          ASSERT_LT(c, 1000) << "n " << n << " nth " << nth;
        }
        const std::string what =
            "n " + std::to_string(n) + " nth " + std::to_string(nth) + " min " + std::to_string(min_units);
        EXPECT_EQ(next, n) << what;
        for (size_t i = 1; i + 1 < sizes.size(); ++i) EXPECT_LE(sizes[i], sizes[i - 1]) << what << " chunk " << i;
        // What the threads finish with: their last chunks are at most two min_units.
        for (size_t i = sizes.size() > static_cast<size_t>(nth) ? sizes.size() - nth : 0; i < sizes.size(); ++i)
          EXPECT_LE(sizes[i], 2 * floor) << what << " chunk " << i;
        if (n >= 4 * nth * floor) {
          int64_t first_round = 0;
          for (int i = 0; i < nth; ++i) first_round += sizes[static_cast<size_t>(i)];
          EXPECT_GE(2 * first_round, n - nth) << what;
          EXPECT_LE(2 * first_round, n + 2 * nth) << what;
        }
        const double rounds = std::log2(static_cast<double>(n) / floor) + 3;
        EXPECT_LE(static_cast<double>(sizes.size()), nth * rounds) << what;
      }
}

// Products of one input with Q8_0 weights share its conversion (the second finds it in scratch); a product of
// another input in between converts its own, and the next product of the first input converts again. Every
// result equals the same product computed alone.
TEST(Ops, MulMatReusesConvertedInputOnlyWhenItIsThere) {
  constexpr int64_t K = 64, N = 32, M = 3;
  const QuantKernels* q8 = find_kernels(GgmlType::Q8_0);
  ASSERT_NE(q8, nullptr);
  std::vector<uint8_t> wq(row_bytes(GgmlType::Q8_0, K) * N);
  std::vector<float> wf(K * N), x1(K * M), x2(K * M);
  for (int64_t i = 0; i < K * N; ++i) wf[i] = static_cast<float>((i * 37) % 23) / 8 - 1.4f;
  for (int64_t i = 0; i < K * M; ++i) x1[i] = static_cast<float>((i * 11) % 17) / 4 - 2, x2[i] = -x1[i] / 3;
  for (int64_t r = 0; r < N; ++r) q8->quantize_row(&wf[r * K], wq.data() + r * row_bytes(GgmlType::Q8_0, K), K);
  auto weights = [&](OpHarness& h) {
    Tensor* w = h.g.new_tensor("w", GgmlType::Q8_0, {K, N}, -1, Pool::INPUT);
    w->data = wq.data();
    w->buffer_id = 99;
    h.g.buffers.push_back({99, Pool::INPUT, "w", w->data, wq.size()});
    return w;
  };
  auto alone = [&](const std::vector<float>& x) {
    OpHarness h;
    Tensor* y = h.b.mul_mat(weights(h), h.leaf("x", {K, M}, x), "y");
    h.run({y});
    return values(y);
  };
  const std::vector<float> alone1 = alone(x1), alone2 = alone(x2);
  ASSERT_NE(alone1, alone2);
  for (int threads : {1, 2}) {
    OpHarness h;  // the same input tensor twice, then another, then the first again
    Tensor* w = weights(h);
    Tensor* a = h.leaf("a", {K, M}, x1);
    Tensor* b = h.leaf("b", {K, M}, x2);
    Tensor* ya = h.b.mul_mat(w, a, "ya");
    Tensor* ya2 = h.b.mul_mat(w, a, "ya2");
    Tensor* yb = h.b.mul_mat(w, b, "yb");
    Tensor* ya3 = h.b.mul_mat(w, a, "ya3");
    auto node_of = [&](const Tensor* t) -> const Node& {
      for (const Node& n : h.g.nodes())
        if (n.out == t) return n;
      throw std::runtime_error("no node");
    };
    EXPECT_TRUE(shares_converted_input(node_of(ya), node_of(ya2)));
    EXPECT_FALSE(shares_converted_input(node_of(ya2), node_of(yb)));
    h.run({ya, ya2, yb, ya3}, threads);
    EXPECT_EQ(values(ya), alone1) << threads << " threads";
    EXPECT_EQ(values(ya2), alone1) << threads << " threads";
    EXPECT_EQ(values(yb), alone2) << threads << " threads";
    EXPECT_EQ(values(ya3), alone1) << threads << " threads";
  }
}

// A thread waiting at a barrier does the idle work a unit at a time until it has none left (then only waits); the
// thread arriving last does none, and both go on once both have arrived.
TEST(ThreadPool, BarrierDoesIdleWorkWhileWaiting) {
  ThreadPool pool(2);
  struct Units {
    std::atomic<int> calls{0};
    std::atomic<int> wrong_thread{0};
    static bool one(void* ctx, const IdleStop&) {  // one unit a call, whether the barrier opened or not
      Units& u = *static_cast<Units*>(ctx);
      if (ThreadPool::current_thread() != 1) ++u.wrong_thread;
      return ++u.calls < 5;  // five units, the fifth says nothing is left
    }
  } units;
  std::atomic<int> after{0};
  pool.run([&](int ith) {
    if (ith == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // thread 1 waits for thread 0
    pool.barrier({&Units::one, &units});
    ++after;
  });
  EXPECT_EQ(units.calls.load(), 5) << "idle units called after the work said none was left, or not all done";
  EXPECT_EQ(units.wrong_thread.load(), 0) << "the thread arriving last did idle work";
  EXPECT_EQ(after.load(), 2);
}

// Idle work that would go on for ever stops when the barrier opens: the waiting thread's work sees stop.requested()
// once the last thread arrives (and not before), returns, and both threads go on.
TEST(ThreadPool, IdleWorkStopsWhenTheBarrierOpens) {
  ThreadPool pool(2);
  struct Endless {
    std::atomic<bool> arrived{false};  // thread 0 is about to arrive
    std::atomic<int> units{0}, calls{0}, stopped_early{0}, stopped{0};
    static bool work(void* ctx, const IdleStop& stop) {
      Endless& e = *static_cast<Endless*>(ctx);
      ++e.calls;
      // Bounded so that a stop never seen fails the test instead of hanging it.
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (std::chrono::steady_clock::now() < give_up) {
        if (stop.requested()) {
          if (!e.arrived.load()) ++e.stopped_early;
          ++e.stopped;
          return true;
        }
        ++e.units;
        std::this_thread::sleep_for(std::chrono::microseconds(1));
      }
      return true;
    }
  } endless;
  std::atomic<int> after{0};
  pool.run([&](int ith) {
    if (ith == 0) {  // arrives once thread 1 is waiting and working (or after 10 s, when the checks below fail)
      for (int i = 0; i < 10'000 && endless.units.load() == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      endless.arrived = true;
    }
    pool.barrier({&Endless::work, &endless});
    ++after;
  });
  EXPECT_EQ(after.load(), 2);
  EXPECT_EQ(endless.stopped.load(), 1) << "the idle work did not see the barrier open";
  EXPECT_EQ(endless.stopped_early.load(), 0) << "the idle work was told to stop before the last thread arrived";
  EXPECT_EQ(endless.calls.load(), 1) << "the waiting thread called the work again after it stopped";
  EXPECT_GT(endless.units.load(), 0);
  EXPECT_FALSE(IdleStop().requested()) << "the default stop asks to stop";
}

// Between-jobs work (ThreadPool::run's `between`) starts once the whole job is done, thread 0's share included (it
// sees thread 0's writes), runs on the other threads only, and stops when the next run starts; work that says none is
// left is not called again; end_between_jobs_work returns only once no thread is in it, and it is not called after.
TEST(ThreadPool, BetweenJobsWorkRunsFromTheJobsEndToTheNextRun) {
  struct Work {
    std::atomic<int> written{0};  // thread 0's output, written at the end of its share
    std::atomic<int> calls{0}, early{0}, wrong_thread{0}, stops{0}, inside{0};
    int limit = 1 << 30;  // calls after which it says none is left
    static bool run(void* ctx, const IdleStop& stop) {
      Work& w = *static_cast<Work*>(ctx);
      ++w.inside;
      if (w.written.load() != 42) ++w.early;
      if (ThreadPool::current_thread() == 0) ++w.wrong_thread;
      const bool more = ++w.calls < w.limit;
      // One unit of ~0.1 ms at a time until stopped (bounded: a stop never seen fails the test, not hangs it).
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (more && !stop.requested() && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      if (stop.requested()) ++w.stops;
      --w.inside;
      return more;
    }
  };
  auto wait_for_calls = [](const Work& w) {
    for (int i = 0; i < 10'000 && w.calls.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    Work w;
    pool.run(
        [&](int ith) {
          if (ith == 0) {  // the others finish first and wait for thread 0's share
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
            w.written = 42;
          }
        },
        {&Work::run, &w});
    wait_for_calls(w);
    EXPECT_GT(w.calls.load(), 0) << threads << " threads: no between-jobs work";
    EXPECT_EQ(w.early.load(), 0) << threads << " threads: began before thread 0 finished its share";
    EXPECT_EQ(w.wrong_thread.load(), 0) << threads << " threads";
    pool.run([](int) {});  // the next run stops it (and has none of its own)
    const int calls = w.calls.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(w.calls.load(), calls) << threads << " threads: called after the next run started";
    EXPECT_EQ(w.stops.load(), calls) << threads << " threads: a call that did not see the stop";

    Work ended;
    ended.written = 42;
    pool.run([](int) {}, {&Work::run, &ended});
    wait_for_calls(ended);
    pool.end_between_jobs_work();
    EXPECT_EQ(ended.inside.load(), 0) << threads << " threads: end_between_jobs_work returned with a thread in it";
    const int ended_calls = ended.calls.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_GT(ended_calls, 0);
    EXPECT_EQ(ended.calls.load(), ended_calls) << threads << " threads: called after end_between_jobs_work";

    Work once;
    once.written = 42;
    once.limit = 1;
    pool.run([](int) {}, {&Work::run, &once});
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(once.calls.load(), threads - 1) << threads << " threads: called again after it said none was left";
    pool.end_between_jobs_work();
  }
  ThreadPool one(1);
  Work w;
  w.written = 42;
  one.run([](int) {}, {&Work::run, &w});
  one.end_between_jobs_work();
  EXPECT_EQ(w.calls.load(), 0) << "one thread: nobody is left to do between-jobs work";
}

// The threads' round trip: a positive, finite time with two threads or more (any machine takes more than a
// nanosecond and, even with its cores shared by other tests, less than 10 ms on average); 0 with one thread.
TEST(ThreadPool, RoundTripIsMeasuredBetweenTwoThreads) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    const double ns = pool.round_trip_ns(200);
    EXPECT_GT(ns, 1.0) << threads << " threads";
    EXPECT_LT(ns, 1e7) << threads << " threads";
  }
  ThreadPool one(1);
  EXPECT_EQ(one.round_trip_ns(200), 0.0);
}

// Work due at a node (ExecObserver::idle_work_due) is finished on thread 0 before any thread starts that node, also
// when every node is split (thread 1 would otherwise run ahead into it): the node's output still holds the marker
// the observer wrote at the run's start, after a pause long enough for another thread to have overwritten it.
TEST(Executor, FinishesDueIdleWorkBeforeTheNodeItIsDueAt) {
  struct DueObserver : ExecObserver {
    std::vector<std::vector<WorkerSpan>> slots;
    const Graph* g = nullptr;
    int due = 0, finished = 0, units = 0;
    bool untouched = false;
    WorkerSpan* span_slots(int thread) override { return slots[thread].data(); }
    static bool unit(void* self, const IdleStop&) {  // never done on its own: only finish_due_idle_work ends it
      ++static_cast<DueObserver*>(self)->units;
      return true;
    }
    IdleWork idle_work() override {
      const Tensor& out = *g->nodes()[due].out;
      std::fill(out.as<float>(), out.as<float>() + out.n_elements(), -12345.0f);
      return {&unit, this};
    }
    int idle_work_due(const Graph&) override { return due; }
    void finish_due_idle_work() override {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const Tensor& out = *g->nodes()[due].out;
      untouched =
          std::all_of(out.as<float>(), out.as<float>() + out.n_elements(), [](float v) { return v == -12345.0f; });
      ++finished;
    }
  };
  for (int threads : {1, 2})
    for (int due : {0, 2, 3}) {
      OpHarness h;
      std::vector<float> wv(64 * 64, 0.5f), xv(64, 1.0f);
      Tensor* w = h.leaf("w", {64, 64}, wv);
      Tensor* x = h.leaf("x", {64}, xv);
      Tensor* a = h.b.add(x, x, "a");
      Tensor* m1 = h.b.mul_mat(w, a, "m1");
      Tensor* m2 = h.b.mul_mat(w, m1, "m2");
      Tensor* m3 = h.b.mul_mat(w, m2, "m3");
      DueObserver obs;
      obs.g = &h.g;
      obs.due = due;
      obs.slots.assign(threads, std::vector<WorkerSpan>(h.g.nodes().size()));
      h.run({a, m1, m2, m3}, threads, 0, &obs);  // kept: no node writes another's bytes
      EXPECT_EQ(obs.finished, 1) << threads << " threads, due at node " << due;
      EXPECT_TRUE(obs.untouched) << threads << " threads: node " << due << " started before its due work was finished";
      EXPECT_EQ(values(m3)[0], 65536.0f) << "the run's result";  // a = 2, then each product multiplies by 32
    }
}

// Spans of every node and thread, pre-filled with a marker the executor must overwrite.
struct SpanRecorder : ExecObserver {
  std::vector<std::vector<WorkerSpan>> slots;
  SpanRecorder(int threads, size_t nodes) : slots(threads, std::vector<WorkerSpan>(nodes, WorkerSpan{1, 1})) {}
  WorkerSpan* span_slots(int thread) override { return slots[thread].data(); }
};

// A chain alternating products worth splitting and elementwise nodes too small to split: each small node runs on
// thread 0 alone, the other threads record no share for it, barriers are kept only where a node's output is read by
// another thread next, and every result is bit-identical to one thread's.
TEST(Executor, SmallNodesRunOnThreadZeroAndResultsMatchOneThread) {
  constexpr int64_t K = 64, N = 64, M = 2;
  std::vector<float> wv(K * N), xv(K * M), bias(K);
  for (int64_t i = 0; i < K * N; ++i) wv[i] = static_cast<float>((i * 29) % 31) / 16 - 1;
  for (int64_t i = 0; i < K * M; ++i) xv[i] = static_cast<float>((i * 7) % 13) / 4 - 1.5f;
  for (int64_t i = 0; i < K; ++i) bias[i] = static_cast<float>(i % 5) / 8;
  struct Result {
    std::vector<float> out;
    std::vector<std::vector<WorkerSpan>> spans;
    std::vector<OpKind> ops;
  };
  // Work of a product here: 16 kB of weights, 512 B of input and output, 8,192 multiply-adds; of an add: ~1 kB.
  constexpr uint64_t kThreshold = 8 * 1024;
  auto run = [&](int threads, uint64_t min_work) {
    OpHarness h;
    Tensor* w = h.leaf("w", {K, N}, wv);
    Tensor* b = h.leaf("b", {K}, bias);
    Tensor* cur = h.leaf("x", {K, M}, xv);
    for (int i = 0; i < 3; ++i) {
      cur = h.b.mul_mat(w, cur, "mm" + std::to_string(i));
      cur = h.b.add(cur, b, "add" + std::to_string(i));
      cur = h.b.rms_norm(cur, 1e-5f, "norm" + std::to_string(i));
    }
    SpanRecorder rec(threads, h.g.nodes().size());
    h.run({cur}, threads, min_work, &rec);
    Result r{values(cur), rec.slots, {}};
    for (const Node& n : h.g.nodes()) {
      r.ops.push_back(n.op);
      EXPECT_EQ(node_work(n) >= kThreshold, n.op == OpKind::MUL_MAT) << n.out->name << ": " << node_work(n);
    }
    return r;
  };
  const Result one = run(1, kThreshold);
  for (int threads : {2, 3}) {
    const Result mixed = run(threads, kThreshold);
    EXPECT_EQ(mixed.out, one.out) << threads << " threads";
    EXPECT_EQ(run(threads, 0).out, one.out) << threads << " threads, every node split";
    EXPECT_EQ(run(threads, UINT64_MAX).out, one.out) << threads << " threads, no node split";
    for (size_t i = 0; i < mixed.ops.size(); ++i) {
      const bool split = mixed.ops[i] == OpKind::MUL_MAT;
      EXPECT_GT(mixed.spans[0][i].end, 1u) << "node " << i << ": thread 0 has no span";
      for (int t = 1; t < threads; ++t) {
        const WorkerSpan s = mixed.spans[t][i];
        if (split)
          EXPECT_GT(s.end, 1u) << "split node " << i << ", thread " << t;
        else
          EXPECT_TRUE(s.start == 0 && s.end == 0) << "node " << i << ", thread " << t << ": " << s.start;
      }
      // Thread 0 runs a small node straight after the one before it (no barrier between two one-thread nodes): its
      // span starts where that one's ended, from one counter read, and every span is ordered.
      EXPECT_LE(mixed.spans[0][i].start, mixed.spans[0][i].end) << "node " << i;
      if (i == 0) continue;
      EXPECT_GE(mixed.spans[0][i].start, mixed.spans[0][i - 1].end) << "node " << i << " overlaps";
      if (!split && mixed.ops[i - 1] != OpKind::MUL_MAT) {
        EXPECT_EQ(mixed.spans[0][i].start, mixed.spans[0][i - 1].end) << "node " << i << " after a one-thread node";
      }
    }
  }
}

TEST(Ops, RopeNormalAndNeox) {
  for (bool neox : {false, true}) {
    OpHarness h;
    // one head of 4 dims, one token at position 1.
    Tensor* x = h.leaf("x", {4, 1, 1}, {1, 2, 3, 4});
    Tensor* pos = h.leaf("pos", {1}, {0});
    RopeParams p{4, neox, 10000.0f, 1.0f, nullptr};
    Tensor* y = h.b.rope(x, pos, p, 1, "r");
    h.run({y});
    const float t0 = 1.0f, t1 = std::pow(10000.0f, -0.5f);
    std::vector<float> v = values(y);
    // normal pairs (0,1) at t0 and (2,3) at t1; NeoX pairs (0,2) at t0 and (1,3) at t1.
    const int a0 = 0, b0 = neox ? 2 : 1, a1 = neox ? 1 : 2, b1 = 3;
    const float in[4] = {1, 2, 3, 4};
    EXPECT_NEAR(v[a0], in[a0] * std::cos(t0) - in[b0] * std::sin(t0), 1e-5);
    EXPECT_NEAR(v[b0], in[a0] * std::sin(t0) + in[b0] * std::cos(t0), 1e-5);
    EXPECT_NEAR(v[a1], in[a1] * std::cos(t1) - in[b1] * std::sin(t1), 1e-5);
    EXPECT_NEAR(v[b1], in[a1] * std::sin(t1) + in[b1] * std::cos(t1), 1e-5);
  }
}

TEST(Ops, AttentionOverCache) {
  OpHarness h;
  // head_dim 2, 1 head, 1 kv head, cache of 4 positions (F32), querying at position 1 (attends 0 and 1).
  Tensor* cache_k = h.leaf("cache_k", {2, 4}, {1, 0, 0, 1, 9, 9, 9, 9});
  Tensor* cache_v = h.leaf("cache_v", {2, 4}, {1, 2, 3, 4, 9, 9, 9, 9});
  cache_k->pool = cache_v->pool = Pool::KV_CACHE;
  Tensor* q = h.leaf("q", {2, 1, 1}, {2, 0});
  Tensor* y = h.b.flash_attn(q, cache_k, cache_v, 1, 2, 1.0f, "attn");
  h.run({y});
  // scores: q.k0 = 2, q.k1 = 0 -> softmax (e^2, 1)/(e^2+1)
  const float p0 = std::exp(2.0f) / (std::exp(2.0f) + 1), p1 = 1 - p0;
  std::vector<float> v = values(y);
  EXPECT_NEAR(v[0], p0 * 1 + p1 * 3, 1e-5);
  EXPECT_NEAR(v[1], p0 * 2 + p1 * 4, 1e-5);
}

TEST(Ops, GetRowsReadsOnlyThoseRows) {
  OpHarness h;
  Tensor* table = h.leaf("table", {2, 3}, {0, 1, 10, 11, 20, 21});
  Tensor* ids = h.leaf("ids", {2}, {0, 0});
  Tensor* y = h.b.get_rows(table, ids, {2, 0}, "rows");
  h.run({y});
  EXPECT_EQ(values(y), (std::vector<float>{20, 21, 0, 1}));
  const Node& n = h.g.nodes()[0];
  ASSERT_EQ(n.reads.size(), 3u);  // row 2, row 0, the ids
  EXPECT_EQ(n.reads[0].length, 8u);
  EXPECT_EQ(n.reads[1].length, 8u);
}

TEST(Ops, BuilderChecksShapesAndBounds) {
  OpHarness h;
  Tensor* w = h.leaf("w", {3, 2}, std::vector<float>(6));
  Tensor* x = h.leaf("x", {4, 1}, std::vector<float>(4));
  try {
    h.b.mul_mat(w, x, "bad");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MUL_MAT 'bad'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(h.b.get_rows(w, x, {2}, "past"), Error);
  EXPECT_THROW(h.b.reshape(x, {3}, "wrong"), Error);
  Tensor* cache = h.leaf("cache", {4, 2}, std::vector<float>(8));
  cache->pool = Pool::KV_CACHE;
  Tensor* rows = h.leaf("rows", {4, 2}, std::vector<float>(8));
  try {
    h.b.set_rows(cache, rows, 1, "overflow");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context overflow"), std::string::npos) << e.what();
  }
}

TEST(Ops, AllocatorReusesFreedMemory) {
  OpHarness h;
  Tensor* x = h.leaf("x", {16}, std::vector<float>(16, 1.0f));
  Tensor* a = h.b.add(x, x, "a");
  Tensor* b2 = h.b.add(a, a, "b");   // a dies here
  Tensor* c = h.b.add(b2, b2, "c");  // may reuse a's bytes
  Tensor* d = h.b.add(c, c, "d");    // kept: bytes of its own
  AllocPlan plan = plan_activations(h.g, {d});
  bool reused = false;
  for (const AllocEvent& e : plan.events) reused |= e.reuse;
  EXPECT_TRUE(reused);
  EXPECT_LT(plan.arena_bytes, 3u * 64u + 1u);
}

TEST(Ops, AllocatorGivesKeptTensorsBytesOfTheirOwn) {
  // The host reads a kept output after the step and, for the tracer, while the next step runs up to the node
  // computing it: no other tensor of the step may share its bytes, though first fit would place it in a hole.
  OpHarness h;
  Tensor* x = h.leaf("x", {16}, std::vector<float>(16, 1.0f));
  Tensor* a = h.b.add(x, x, "a");
  Tensor* b2 = h.b.add(a, a, "b");   // a dies here
  Tensor* c = h.b.add(b2, b2, "c");  // kept
  Tensor* d = h.b.add(b2, b2, "d");  // kept, computed after the others died
  AllocPlan plan = plan_activations(h.g, {c, d, c});
  for (const Tensor* k : {c, d})
    for (const AllocEvent& e : plan.events) {
      if (e.tensor == k) {
        EXPECT_EQ(e.kind, AllocEvent::ALLOC) << k->name << " is freed";
        EXPECT_FALSE(e.reuse) << k->name;
        continue;
      }
      if (e.kind != AllocEvent::ALLOC) continue;
      const bool overlap = e.offset < k->offset + k->n_bytes() && k->offset < e.offset + e.bytes;
      EXPECT_FALSE(overlap) << e.tensor->name << " at [" << e.offset << ", " << e.offset + e.bytes
                            << ") shares bytes of " << k->name << " at [" << k->offset << ", "
                            << k->offset + k->n_bytes() << ")";
    }
  EXPECT_NE(c->offset, d->offset);
}

}  // namespace
}  // namespace tt
