// Runs a step's graph on the thread pool: every thread walks the nodes in order, does its share of each, and
// meets the others at a barrier. An observer (the tracer) sees per-thread spans and completed nodes.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "graph/graph.h"

namespace tt {

class ThreadPool;

// Monotonic nanoseconds (steady clock).
uint64_t now_ns();

class ExecObserver {
 public:
  virtual ~ExecObserver() = default;
  // Called by thread `thread` for its own share of node `node` (lock-free: per-thread storage).
  virtual void on_span(int thread, int node, uint64_t start_ns, uint64_t end_ns) = 0;
  // Called on thread 0 after every thread has finished node `node` (only when wants_node_done()).
  virtual void on_node_done(int node, const Node& n) {}
  virtual bool wants_node_done() const { return false; }
  // Only when wants_node_begin() (e.g. `run --io-trace`, `--prefetch`): on_node_begin is called on thread 0 before
  // any worker starts node `node` (the workers wait for it at a barrier), then on_worker_begin by each worker just
  // before its own share. Views get neither.
  virtual void on_node_begin(int node, const Node& n) {}
  virtual void on_worker_begin(int thread, int node) {}
  virtual bool wants_node_begin() const { return false; }
};

class Executor {
 public:
  explicit Executor(ThreadPool& pool) : pool_(pool) {}
  // scratch must hold max scratch_bytes over the graph's nodes.
  void run(const Graph& g, uint8_t* scratch, ExecObserver* observer);

 private:
  ThreadPool& pool_;
  // Work-chunk counters shared by the threads of a node (ComputeContext::next_chunk); executed nodes alternate
  // between the two so that one can be reset while the other is in use.
  alignas(64) std::atomic<int64_t> chunk_counters_[2] = {};
};

size_t max_scratch_bytes(const Graph& g);

}  // namespace tt
