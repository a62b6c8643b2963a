// Each op's kernel on small hand-computed cases, and the builder's always-on bounds and shape checks.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
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
    for (int i = 0; i < 5; ++i) ys.push_back(h.b.mul_mat(w, x, fmt::format("y{}", i)));
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

// A job that throws on any one thread ends on every thread: the others leave their barriers instead of waiting for
// it, run() rethrows the first error once all have stopped, and the pool runs the next job normally.
TEST(ThreadPool, AnErrorOnOneThreadEndsTheJobOnEveryThread) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    for (int thrower = 0; thrower < threads; ++thrower) {
      std::atomic<int> finished{0};
      try {
        pool.run([&](int ith) {
          for (int b = 0; b < 8; ++b) {
            if (ith == thrower && b == 3) throw std::runtime_error("thread " + std::to_string(ith) + " failed");
            pool.barrier();
          }
          finished.fetch_add(1);
        });
        ADD_FAILURE() << "run() returned normally";
      } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()), "thread " + std::to_string(thrower) + " failed");
      }
      EXPECT_EQ(finished.load(), 0) << threads << " threads: a thread passed every barrier of a failed job";
      // The next job's barriers hold again: every thread sees every other's write before the barrier.
      std::vector<int> seen(threads * threads, -1);
      std::vector<std::atomic<int>> marks(threads);
      pool.run([&](int ith) {
        marks[ith].store(ith + 1);
        pool.barrier();
        for (int t = 0; t < threads; ++t) seen[ith * threads + t] = marks[t].load();
      });
      for (int i = 0; i < threads * threads; ++i) EXPECT_EQ(seen[i], i % threads + 1) << threads << " threads";
    }
  }
}

// run_async returns once the caller's share is done while the others go on (the caller proceeds while a worker is
// still held); wait() and the next run() wait for them; a background share's error comes out of wait(), or out of
// the next run() before its job starts, and the pool then runs jobs normally.
TEST(ThreadPool, RunAsyncLeavesTheOtherSharesRunningUntilWaitOrTheNextRun) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    std::atomic<bool> release{false};
    std::atomic<int> done{0};
    const std::function<void(int)> held = [&](int ith) {  // until released, or 5 s (then a failure, not a hang)
      if (ith == 0) return;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!release.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
      done.fetch_add(1);
    };
    pool.run_async(held);
    EXPECT_EQ(done.load(), 0) << threads << " threads: run_async waited for the other shares";
    release.store(true);
    pool.wait();
    EXPECT_EQ(done.load(), threads - 1) << threads << " threads";

    release.store(false);
    done.store(0);
    pool.run_async(held);
    release.store(true);
    std::atomic<int> second{0};
    pool.run([&](int) { second.fetch_add(1); });  // waits for `held` first
    EXPECT_EQ(done.load(), threads - 1) << threads << " threads: run() began before the background shares ended";
    EXPECT_EQ(second.load(), threads);

    const std::function<void(int)> throws = [&](int ith) {
      if (ith == threads - 1) throw std::runtime_error("background share failed");
    };
    pool.run_async(throws);
    EXPECT_THROW(pool.wait(), std::runtime_error) << threads << " threads";
    pool.run_async(throws);
    bool ran = false;
    try {
      pool.run([&](int) { ran = true; });
      ADD_FAILURE() << threads << " threads: run() did not rethrow the background share's error";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "background share failed");
    }
    EXPECT_FALSE(ran) << threads << " threads: the next job started after a failed background share";
    second.store(0);
    pool.run([&](int) { second.fetch_add(1); });
    EXPECT_EQ(second.load(), threads) << threads << " threads";
  }
  ThreadPool one(1);  // one thread: run_async is run
  int calls = 0;
  one.run_async([&](int) { ++calls; });
  one.wait();
  EXPECT_EQ(calls, 1);
}

// A barrier whose waiting threads read ahead (the executor's next product's weights) synchronises as the plain one:
// no thread passes it before every thread has arrived, whether the span is long (the others arrive first), short,
// or empty; only the threads that wait ask for the span.
TEST(ThreadPool, ABarrierThatReadsAheadStillSynchronises) {
  std::vector<uint8_t> weights(8 << 20, 1);
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    std::atomic<int> arrived{0}, early{0}, asked{0};
    constexpr int kRounds = 300;
    pool.run([&](int ith) {
      for (int r = 0; r < kRounds; ++r) {
        arrived.fetch_add(1);
        const size_t bytes = (r + ith) % 3 == 0 ? 0 : (r + ith) % 3 == 1 ? 300 : weights.size();
        pool.barrier([&] {
          asked.fetch_add(1);
          return std::span<const uint8_t>(weights.data(), bytes);
        });
        if (arrived.load() < (r + 1) * threads) early.fetch_add(1);
        pool.barrier();
      }
    });
    EXPECT_EQ(early.load(), 0) << threads << " threads";
    EXPECT_EQ(arrived.load(), kRounds * threads);
    // The last thread to arrive releases the others without asking what to read.
    EXPECT_LE(asked.load(), kRounds * (threads - 1)) << threads << " threads";
    EXPECT_GT(asked.load(), 0) << threads << " threads";
  }
}

// The weight bytes a thread reads ahead before a product are its first chunk of the product's rows (the one it takes
// without a claim): whole 16-row tiles from the weight's start, thread after thread, about half of the rows in the
// first round, cut at max_bytes; nothing for one thread or another op.
TEST(Kernels, FirstWeightBytesAreEachThreadsFirstChunkOfRows) {
  constexpr int64_t K = 32, N = 1000;
  OpHarness h;
  Tensor* w = h.leaf("w", {K, N}, std::vector<float>(K * N, 0.5f));
  Tensor* x = h.leaf("x", {K, 1}, std::vector<float>(K, 1.0f));
  Tensor* y = h.b.mul_mat(w, x, "mm");
  h.b.add(y, y, "add");
  const Node& mm = h.g.nodes()[0];
  const Node& add = h.g.nodes()[1];
  ASSERT_EQ(mm.op, OpKind::MUL_MAT);
  const uint64_t row = w->row_size(), tile = 16 * row, all = N * row;
  for (int nth : {2, 3, 4}) {
    const uint8_t* next = w->data;
    uint64_t first_round = 0;
    for (int ith = 0; ith < nth; ++ith) {
      const std::span<const uint8_t> b = first_weight_bytes(mm, ith, nth, SIZE_MAX);
      EXPECT_EQ(b.data(), next) << nth << " threads, thread " << ith;
      EXPECT_GT(b.size(), 0u);
      EXPECT_EQ(b.size() % tile, 0u) << nth << " threads, thread " << ith;
      next = b.data() + b.size();
      first_round += b.size();
      EXPECT_EQ(first_weight_bytes(mm, ith, nth, 1000).size(), 1000u);
    }
    EXPECT_GE(first_round, all * 2 / 5) << nth << " threads";
    EXPECT_LE(first_round, all * 3 / 5) << nth << " threads";
    EXPECT_TRUE(first_weight_bytes(add, 0, nth, SIZE_MAX).empty());
  }
  EXPECT_TRUE(first_weight_bytes(mm, 0, 1, SIZE_MAX).empty());
  // Fewer tiles than threads: the last thread's first chunk is empty, at the weight's end.
  OpHarness small;
  Tensor* ws = small.leaf("w", {K, 20}, std::vector<float>(K * 20, 0.5f));
  small.b.mul_mat(ws, small.leaf("x", {K, 1}, std::vector<float>(K, 1.0f)), "mm");
  const std::span<const uint8_t> last = first_weight_bytes(small.g.nodes()[0], 2, 3, SIZE_MAX);
  EXPECT_EQ(last.size(), 0u);
  EXPECT_EQ(last.data(), ws->data + 20 * ws->row_size());
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

// An error raised mid-graph by the observer, on thread 0 before a split node or on a worker at its share, stops the
// run with that error (before, the other threads waited at the next barrier forever); the same graph then runs
// again to the same result as one thread.
TEST(Executor, AnErrorMidGraphStopsEveryThread) {
  struct Failing : SpanRecorder {
    int node, thread;
    Failing(int threads, size_t nodes, int node, int thread)
        : SpanRecorder(threads, nodes), node(node), thread(thread) {}
    bool wants_node_begin() const override { return true; }
    void on_node_begin(int i, const Node&) override {
      if (thread == 0 && i == node) throw std::runtime_error("node begin failed");
    }
    void on_worker_begin(int t, int i) override {
      if (t == thread && thread != 0 && i == node) throw std::runtime_error("worker begin failed");
    }
  };
  constexpr int64_t K = 64, N = 64, M = 2;
  std::vector<float> wv(K * N), xv(K * M);
  for (int64_t i = 0; i < K * N; ++i) wv[i] = static_cast<float>((i * 29) % 31) / 16 - 1;
  for (int64_t i = 0; i < K * M; ++i) xv[i] = static_cast<float>((i * 7) % 13) / 4 - 1.5f;
  auto build = [&](OpHarness& h) {
    Tensor* w = h.leaf("w", {K, N}, wv);
    Tensor* cur = h.leaf("x", {K, M}, xv);
    for (int i = 0; i < 4; ++i) cur = h.b.rms_norm(h.b.mul_mat(w, cur, "mm" + std::to_string(i)), 1e-5f, "n");
    return cur;
  };
  OpHarness alone;
  const Tensor* out1 = build(alone);
  alone.run({out1}, 1);
  for (int threads : {2, 3})
    for (int thread : {0, 1}) {
      OpHarness h;
      const Tensor* out = build(h);
      const int node = static_cast<int>(h.g.nodes().size()) / 2;
      Failing failing(threads, h.g.nodes().size(), node, thread);
      try {
        h.run({out}, threads, 0, &failing);
        ADD_FAILURE() << threads << " threads, thread " << thread << ": no error";
      } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()), thread == 0 ? "node begin failed" : "worker begin failed");
      }
      SpanRecorder rec(threads, h.g.nodes().size());
      h.run({out}, threads, 0, &rec);
      EXPECT_EQ(values(out), values(out1)) << threads << " threads";
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
  Tensor* y = h.b.flash_attn(q, cache_k, cache_v, 1, 2, 1.0f, {}, 0, "attn");
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
