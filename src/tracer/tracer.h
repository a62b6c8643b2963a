// The tracer observes the engine (graph, allocator, executor) and the sampler during generation and writes the run
// directory through its parts, each with one file: trace.bin's step records (OpRecords), steps.jsonl (StepLines),
// graphs/ (GraphCatalog), buffers.json (BufferTimeline), IO records (IoProbe, `--io-trace`) and value statistics
// with the finite check (ValueCheck). Compute threads only store two timestamps a node into their own slots; a
// step's records are written at its end on the run's thread, and its line on the pool's second thread, in the
// background beside the next step's preparation (the pool's next job waits for it). Tracer owns the parts and
// forwards the engine's hooks to them.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "exec/executor.h"
#include "exec/thread_pool.h"
#include "model/generate.h"
#include "trace/run_dir.h"
#include "trace/trace_file.h"
#include "tracer/buffer_timeline.h"
#include "tracer/graph_catalog.h"
#include "tracer/io_probe.h"
#include "tracer/op_records.h"
#include "tracer/step_lines.h"
#include "tracer/value_check.h"
#include "tracer/weight_loads.h"

namespace tt {

struct Model;

struct TraceOptions {
  bool values = false;        // --trace-values: statistics and hash of every op's output
  bool check_finite = false;  // --check-finite: stop at the first NaN/Inf
  int logit_top_k = 10;       // tokens in each step's logit landscape
  bool io = false;            // --io-trace: page-cache residency before each op, faults and storage reads during it
  nlohmann::json to_json() const;
};

class Tracer : public GenerateObserver {
 public:
  // pool: the engine's compute threads, which the tracer's step-end work also runs on.
  Tracer(RunDirWriter& dir, const Model& model, TraceOptions options, ThreadPool& pool, uint64_t run_start_ns);
  ~Tracer() override;
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  void on_step_begin(int32_t step, Phase phase, int32_t pos_begin, int32_t pos_end) override;
  void on_graph_ready(const Graph& g, const AllocPlan& plan) override;
  WorkerSpan* span_slots(int thread) override { return op_records_.span_slots(thread); }
  bool wants_node_begin() const override { return io_ != nullptr || prefetcher_ != nullptr; }
  void on_node_begin(int node, const Node& n) override;
  void on_worker_begin(int thread, int node) override;
  void on_worker_end(int thread, int node) override;
  bool wants_node_done() const override { return values_.wanted(); }
  void on_node_done(int node, const Node& n) override { values_.on_node_done(node, n); }
  void on_step_end(const StepOutcome& outcome) override;
  // --prefetch: the prefetcher is told about each graph and each node start (not owned).
  void set_prefetcher(Prefetcher* p) { prefetcher_ = p; }
  // --weight-budget: each step's weight accesses become WEIGHT_LOAD records and its line's weight_* fields.
  void set_weight_store(WeightStore& s) { weight_loads_.emplace(s, t0_); }

  // Records the runtime buffers that exist before the first step (KV cache layers...).
  void record_static_buffer(const std::string& name, Pool pool, int buffer_id, uint64_t bytes) {
    timeline_.record_static_buffer(name, pool, buffer_id, bytes);
  }
  // Writes what is buffered, graphs/index.json and buffers.json; returns counts for run.json.
  nlohmann::json finish();
  // The time spent in the tracer's callbacks on the run's thread so far (run.json's tracer_ns).
  uint64_t self_ns() const { return ticks_to_ns(self_ticks_); }
  // Of which in generation steps (from their on_step_begin to their on_step_end).
  uint64_t generate_self_ns() const { return ticks_to_ns(generate_self_ticks_); }
  // The generation steps' steps.jsonl lines on the pool's second thread (beside the next step's preparation, not in
  // self_ns), once the last one is done (waits for it).
  uint64_t generate_line_ns() {
    pool_.wait();
    return ticks_to_ns(generate_line_ticks_);
  }
  // The same in tick_count() units (exact differences between two readings).
  uint64_t self_ticks() const { return self_ticks_; }

 private:
  uint64_t t0_;
  ThreadPool& pool_;
  trace::TraceWriter writer_;  // trace.bin, whose string table the catalog and the timeline share
  GraphCatalog catalog_;
  OpRecords op_records_;
  StepLines step_lines_;
  BufferTimeline timeline_;
  ValueCheck values_;
  std::unique_ptr<IoProbe> io_;  // with --io-trace
  Prefetcher* prefetcher_ = nullptr;
  std::optional<WeightLoadRecorder> weight_loads_;  // with --weight-budget
  const Graph* graph_ = nullptr;                    // the running step's
  const GraphEntry* entry_ = nullptr;
  int32_t step_ = 0;
  Phase phase_ = Phase::PROMPT;
  uint64_t step_start_ = 0;
  // The step's steps.jsonl line, written on the pool's second thread in the background (line_job_) beside the
  // next step's preparation: what it reads of the step, copied (logits and hidden state by that thread, before
  // on_step_end returns: the caller may overwrite its buffers then).
  struct Line {
    StepOutcome outcome;  // its spans point into the vectors below
    std::vector<int32_t> inputs;
    std::vector<float> logits, hidden;
    std::span<const float> logits_from, hidden_from;  // the caller's
    std::optional<WeightStepTotals> weights;
    uint64_t now_ns = 0, n_ops = 0;
    int graph = 0;
    std::atomic<bool> copied{false};
  };
  Line line_;
  std::function<void(int)> line_job_;
  // The lines' time on their thread (run.json's line_ns), and of it in generation steps; read after the pool's wait.
  uint64_t line_ticks_ = 0, generate_line_ticks_ = 0;

  // The tracer's own cost: time spent in its callbacks on the run's thread (where it delays the next step), in
  // tick_count() units: every callback is timed, and a counter read costs less than a steady-clock read
  // (docs/performance.md). self_ns() converts them at the counter's rate over the run so far (from ticks0_, ns0_:
  // the two read together at construction).
  uint64_t self_ticks_ = 0, generate_self_ticks_ = 0;
  uint64_t ticks0_ = 0, ns0_ = 0;
  uint64_t ticks_to_ns(uint64_t ticks) const;
  struct SelfTimer {
    Tracer& tracer;
    uint64_t start = tick_count();
    ~SelfTimer() {
      const uint64_t ticks = tick_count() - start;
      tracer.self_ticks_ += ticks;
      if (tracer.phase_ == Phase::GENERATE) tracer.generate_self_ticks_ += ticks;
    }
  };
};

}  // namespace tt
