// Runs a step's graph on the thread pool: every thread walks the nodes in order, does its share of each node worth
// splitting and meets the others at a barrier after it; nodes too small to split run on thread 0 alone, back to
// back. An observer (the tracer) sees per-thread spans and completed nodes.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/clock.h"
#include "exec/thread_pool.h"
#include "graph/graph.h"
#include "graph/kernels.h"

namespace tt {

class ThreadPool;

// One worker's share of one node, in tick_count() units; {0, 0}: the worker had no share.
struct WorkerSpan {
  uint64_t start = 0, end = 0;
};

class ExecObserver {
 public:
  virtual ~ExecObserver() = default;
  // Where thread `thread` stores its span of every node of the graph being run (one slot per node, owned by the
  // observer, written without locks or calls): views by thread 0 only, as {t, t}; a node run by thread 0 alone
  // (too small to split) by thread 0, and as {0, 0} by the others; every other node by every thread.
  virtual WorkerSpan* span_slots(int thread) = 0;
  // Only when wants_node_begin(): called by each worker just after its share of a node.
  virtual void on_worker_end(int /*thread*/, int /*node*/) {}
  // Called on thread 0 after every thread has finished node `node` (only when wants_node_done()).
  virtual void on_node_done(int /*node*/, const Node& /*n*/) {}
  virtual bool wants_node_done() const { return false; }
  // Only when wants_node_begin() (e.g. `run --io-trace`, `--prefetch`): on_node_begin is called on thread 0 before
  // any worker starts node `node` (the workers wait for it at a barrier), then on_worker_begin by each worker just
  // before its own share. Views get neither.
  virtual void on_node_begin(int /*node*/, const Node& /*n*/) {}
  virtual void on_worker_begin(int /*thread*/, int /*node*/) {}
  virtual bool wants_node_begin() const { return false; }
};

// Makes the model-file bytes each node reads resident before it runs (`run --weight-budget`: model/weight_store.h).
// Called on thread 0 only: check() before a graph runs, acquire() before any thread starts a node that reads model
// weights (its MUL_MAT_ID reads resolved), release() once every thread is done with that node. When acquire() is
// called every node before it has finished on every thread.
class NodeResidency {
 public:
  virtual ~NodeResidency() = default;
  virtual void check(const Graph& g) = 0;
  virtual void acquire(int node, const Node& n) = 0;
  virtual void release(int node, const Node& n) = 0;
};

class Executor {
 public:
  // Nodes whose node_work() is below min_parallel_work run on thread 0 alone (0: every node is split).
  explicit Executor(ThreadPool& pool, uint64_t min_parallel_work = kMinParallelWork)
      : pool_(pool), barrier_(pool), min_parallel_work_(min_parallel_work) {}
  // scratch must hold max scratch_bytes over the graph's nodes. Nodes whose reads depend on the step's values
  // (has_routed_reads) get them set (resolve_routed_reads) by thread 0 before the node starts.
  void run(Graph& g, uint8_t* scratch, ExecObserver* observer);
  // Null: weights are used where their Tensor::data points, as they are.
  void set_residency(NodeResidency* residency) { residency_ = residency; }
  // The threads' work memory (ComputeContext::thread_scratch) as sized by the last run.
  size_t thread_memory_bytes() const { return thread_scratch_.size(); }

 private:
  // Per node: kSplit (all threads share it, else thread 0 runs it alone), kBarrierAfter, kResident (reads model
  // weights that residency_ makes resident).
  static constexpr uint8_t kSplit = 1, kBarrierAfter = 2, kResident = 4;
  void plan(const Graph& g);

  ThreadPool& pool_;
  // The kernels' barrier (ComputeContext::threads): the pool's.
  struct PoolBarrier final : Barrier {
    explicit PoolBarrier(ThreadPool& p) : pool(p) {}
    void wait() override { pool.barrier(); }
    ThreadPool& pool;
  } barrier_;
  uint64_t min_parallel_work_;
  NodeResidency* residency_ = nullptr;
  std::vector<uint8_t> plan_;  // per node, rebuilt each run (positions change the attention's work)
  // Per node with a barrier after it: the next split node whose model weights the waiting threads read ahead
  // (first_weight_bytes), or -1.
  std::vector<int32_t> read_ahead_;
  // Each thread's work memory (ComputeContext::thread_scratch): thread i's at i * thread_scratch_stride_, grown by
  // plan() to the graph's largest thread_scratch_bytes, so kernels never allocate.
  AlignedBuffer thread_scratch_;
  size_t thread_scratch_stride_ = 0;
  // Work-chunk counters shared by the threads of a node (ComputeContext::next_chunk); executed nodes alternate
  // between the two so that one can be reset while the other is in use.
  alignas(64) std::atomic<int64_t> chunk_counters_[2] = {};
};

size_t max_scratch_bytes(const Graph& g);

}  // namespace tt
