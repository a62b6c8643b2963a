// The tracer observes the engine (graph, allocator, executor) and the sampler during generation and writes the run
// directory through its parts, one job each: the graph catalog (graphs/), the op records (trace.bin), the step lines
// (steps.jsonl), the buffer timeline (buffers.json) and the IO probe (--io-trace, --prefetch). On the run's thread
// it only captures: compute threads store two timestamps per node into the step's capture, and at the step's end the
// capture takes the sampler's outcome and copies of the logits and hidden state. It then goes through a bounded
// queue to one writer thread, which formats it for the parts; a full queue makes the run's thread wait (nothing is
// dropped, nothing grows without bound).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "exec/thread_pool.h"
#include "model/generate.h"
#include "trace/run_dir.h"
#include "tracer/buffer_timeline.h"
#include "tracer/graph_catalog.h"
#include "tracer/io_probe.h"
#include "tracer/op_records.h"
#include "tracer/step_capture.h"
#include "tracer/step_lines.h"

namespace tt {

struct TraceOptions {
  bool values = false;        // --trace-values: statistics and hash of every op's output
  bool check_finite = false;  // --check-finite: stop at the first NaN/Inf
  int logit_top_k = 10;       // tokens in each step's logit landscape
  bool io = false;            // --io-trace: page-cache residency before each op, faults and storage reads during it
  nlohmann::json to_json() const;
};

class Tracer : public GenerateObserver {
 public:
  // `pool`: the engine's (its size is the number of workers whose spans are captured).
  Tracer(RunDirWriter& dir, const Model& model, TraceOptions options, const ThreadPool& pool, uint64_t run_start_ns);
  ~Tracer() override;
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  void on_step_begin(int32_t step, Phase phase, int32_t pos_begin, int32_t pos_end) override;
  void on_graph_ready(const Graph& g, const AllocPlan& plan, std::span<const float> logits) override;
  WorkerSpan* span_slots(int thread) override;
  void on_node_begin(int node, const Node& n) override { io_.on_node_begin(node, n, *capture_); }
  void on_worker_begin(int thread, int /*node*/) override { io_.on_worker_begin(thread); }
  void on_worker_end(int thread, int node) override { io_.on_worker_end(thread, node, *capture_); }
  bool wants_node_begin() const override { return io_.active(); }
  void on_node_done(int node, const Node& n) override;
  bool wants_node_done() const override { return options_.values || options_.check_finite; }
  void on_step_end(const StepOutcome& outcome) override;
  // --prefetch: the prefetcher is told about each graph and each node start (not owned).
  void set_prefetcher(Prefetcher* p) { io_.set_prefetcher(p); }

  // Records the runtime buffers that exist before the first step (KV cache layers...).
  void record_static_buffer(const std::string& name, Pool pool, int buffer_id, uint64_t bytes);
  // Waits until the writer thread has written every step handed to it (a caller timing the steps, bench, counts
  // it with them); rethrows the writer's failure.
  void drain();
  // Drains, then writes graphs/index.json and buffers.json; returns counts for run.json.
  nlohmann::json finish();
  // The time spent in the tracer's callbacks on the run's thread so far, waits for a full queue included (run.json's
  // tracer_ns).
  uint64_t self_ns() const { return ticks_to_ns(self_ticks_); }
  // Of which in generation steps (from their on_step_begin to their on_step_end).
  uint64_t generate_self_ns() const { return ticks_to_ns(generate_self_ticks_); }

 private:
  void writer_loop();
  void write_step(StepCapture& c);  // on the writer thread
  void stop_writer();
  void rethrow_writer_failure();

  RunDirWriter& dir_;
  const Model& model_;
  TraceOptions options_;
  int n_threads_;
  uint64_t t0_;

  // The parts. The catalog and the IO probe work on the run's thread, the others on the writer thread.
  GraphCatalog catalog_;
  IoProbe io_;
  OpRecordWriter records_;
  StepLineWriter lines_;
  BufferTimeline buffers_;

  // The queue: kQueueSteps captures, each either free (the run's thread takes one at a step's begin), being filled
  // (capture_), or ready for the writer thread, which gives it back once written.
  static constexpr size_t kQueueSteps = 4;
  std::vector<std::unique_ptr<StepCapture>> captures_;
  std::vector<StepCapture*> free_, ready_;  // ready_ in step order
  size_t writing_ = 0;                      // captures the writer thread holds
  bool closing_ = false;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::exception_ptr writer_failure_;
  std::thread writer_;
  static constexpr uint64_t kFlushIntervalNs = 500'000'000;  // the writer writes the files at least this often
  uint64_t last_flush_ns_ = 0;

  // Run's thread.
  StepCapture* capture_ = nullptr;  // the running step's
  Phase phase_ = Phase::PROMPT;
  std::vector<ExplicitBufferEvent> buffer_events_;  // for the next capture
  uint64_t arena_bytes_ = 0, scratch_bytes_ = 0, static_bytes_ = 0;
  std::optional<std::string> nonfinite_;  // first NaN/Inf seen with --check-finite
  std::vector<float> values_;             // on_node_done's conversions, reused
  uint64_t steps_ = 0;

  // The tracer's own cost on the run's thread, in tick_count() units (a counter read costs less than a clock read);
  // converted at the counter's rate over the run so far (from ticks0_, ns0_, read together at construction).
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
