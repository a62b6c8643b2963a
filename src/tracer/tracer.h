// The tracer observes the engine (graph, allocator, executor) and the sampler during generation and writes the
// run directory: trace.bin (one OP record per executed graph node, SPAN records per worker), graphs/,
// buffers.json, steps.jsonl. Compute threads only store two timestamps into their own preallocated slots. The rest
// of the tracer's work is done while the threads wait: each record's form at the step's barriers; the step's logit
// landscape and logits' hash by the other threads once its graph has run, while thread 0 samples (between runs);
// what is left of them, the step's records and its steps.jsonl line at the next step's barriers.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "model/generate.h"
#include "trace/hash.h"
#include "trace/json_line.h"
#include "trace/records.h"
#include "trace/run_dir.h"
#include "trace/trace_file.h"
#include "tracer/io_probe.h"
#include "tracer/landscape.h"
#include "tracer/weight_loads.h"

namespace tt {

class Tokenizer;

struct TraceOptions {
  bool values = false;        // --trace-values: statistics and hash of every op's output
  bool check_finite = false;  // --check-finite: stop at the first NaN/Inf
  int logit_top_k = 10;       // tokens in each step's logit landscape
  bool io = false;            // --io-trace: page-cache residency before each op, faults and storage reads during it
  bool compact = true;  // OP_ADVANCES_PACKED / OP_DELTA records for ops whose record follows from the previous step's
                        // (the reader restores them whole); false: a full OP record per op
  nlohmann::json to_json() const;
};

// Statistics of a float vector: min, max, mean, std, XXH3-64 of the bytes.
struct ReadoutStats {
  float min = 0, max = 0;
  double mean = 0, std = 0;
  uint64_t hash = 0;
  void write(JsonLine& j) const;  // {"min", "max", "mean", "std", "hash" (16 hex digits)}
};
ReadoutStats readout_stats(std::span<const float> v);
uint64_t readout_hash(std::span<const float> v);  // XXH3-64 of the bytes

class Tracer : public GenerateObserver {
 public:
  // `pool`: the engine's, whose threads do the tracer's work in their waits (it must outlive the tracer).
  Tracer(RunDirWriter& dir, const Model& model, TraceOptions options, ThreadPool& pool, uint64_t run_start_ns);

  void on_step_begin(int32_t step, Phase phase, int32_t pos_begin, int32_t pos_end) override;
  void on_graph_ready(const Graph& g, const AllocPlan& plan, std::span<const float> logits) override;
  WorkerSpan* span_slots(int thread) override { return records_[running_].spans[thread].data(); }
  void on_worker_end(int thread, int node) override;
  bool wants_node_done() const override { return options_.values || options_.check_finite; }
  void on_node_done(int node, const Node& n) override;
  void on_step_end(const StepOutcome& outcome) override;
  void on_graph_rebuild() override;
  bool wants_node_begin() const override { return options_.io || prefetcher_ != nullptr; }
  void on_node_begin(int node, const Node& n) override;
  void on_worker_begin(int thread, int node) override;
  IdleWork idle_work() override;
  int idle_work_due(const Graph& g) override;
  void finish_due_idle_work() override;
  IdleWork between_runs_work() override;
  // --prefetch: the prefetcher is told about each graph and each node start (not owned).
  void set_prefetcher(Prefetcher* p) { prefetcher_ = p; }
  // --weight-budget: each step's weight accesses become WEIGHT_LOAD records and its line's weight_* fields.
  void set_weight_store(WeightStore& s) { weight_loads_.emplace(s, t0_); }
  ~Tracer() override;

  // Records the runtime buffers that exist before the first step (KV cache layers...).
  void record_static_buffer(const std::string& name, Pool pool, int buffer_id, uint64_t bytes);
  // The last step's records, landscape, hash and line, which a next step's waits would have made (counted in
  // self_ns() and, after a generation step, generate_self_ns()): finish() does it first, a caller timing the steps
  // (bench) calls it before to count it with them. Called while the engine lives: its logits are read in place.
  void finish_last_step();
  // Writes what is left of the last step, graphs/index.json and buffers.json; returns counts for run.json. Called
  // while the engine lives (finish_last_step).
  nlohmann::json finish();
  // The time spent in the tracer's callbacks on the run's thread so far, including finishing the previous step's
  // work before the output node (finish_due_idle_work) (run.json's tracer_ns).
  uint64_t self_ns() const { return ticks_to_ns(self_ticks_); }
  // Of which in generation steps (from their on_step_begin to their on_step_end).
  uint64_t generate_self_ns() const { return ticks_to_ns(generate_self_ticks_); }
  // Where the tracer's deferred work ran over the run: for tests of that scheduling, not part of run.json.
  struct Scheduling {
    uint64_t records_chosen_waiting = 0;    // op records whose form the threads chose while waiting at barriers
    uint64_t steps_begun_between_runs = 0;  // steps whose landscape a thread began between runs
    uint64_t begun_steps_given_up = 0;      // of those, given up (the caller's logits were others)
  };
  // Complete after finish().
  const Scheduling& scheduling() const { return scheduling_; }

 private:
  using Span = WorkerSpan;
  struct BufferEvent {
    uint64_t t_ns;
    uint32_t step;
    char kind;  // 'a' alloc, 'f' free
    Pool pool;
    int32_t buffer_id;
    uint64_t offset, bytes;
    uint32_t tensor;  // id in the trace's string table
    bool reuse;
  };
  // The interned names of one graph structure (by graph_key): node i's op, output and input names start at
  // ids[node_offset[i]]; the allocation plan's events and peak. Built once per distinct graph.
  struct GraphNames {
    std::vector<uint32_t> ids, node_offset;
    std::vector<uint8_t> repeatable;  // node reads and writes only step-independent bytes
    std::vector<uint32_t> compared;   // the other nodes, in order: choose_record compares their placement each step
    std::vector<uint32_t> routed;     // nodes whose reads the step's routing decides: compared at the step's end
    std::vector<uint8_t> view;        // node is a view (no SPAN records)
    struct Event {                    // the allocation plan's events (the same for every step of the graph)
      int node;
      bool alloc, reuse;
      uint64_t offset, bytes;
      uint32_t tensor;
    };
    std::vector<Event> events;
    uint64_t activation_peak = 0;       // live arena bytes at the plan's peak
    uint32_t activation_peak_node = 0;  // the tensor allocated there
  };
  struct StepBuffers {
    uint32_t step;
    const GraphNames* names;
    size_t times_at;      // index of the step's first node time among all steps' (see node_times_)
    uint64_t step_start;  // trace time of the step's start (events of nodes the run thread did not run)
    size_t explicit_end;  // buffer_events_ recorded before this step's arena events
    uint64_t arena_bytes, scratch_bytes, static_bytes;
  };
  // How a node's record goes out on a compact step (write_records_piece): advanced by its stride, with changes, or
  // whole.
  enum class RecordChoice { ADVANCE, DELTA, FULL };
  // The reader's view of node i's placement fields (trace::for_each_placement_field) after its latest record: the
  // record's layout and fields, and its stride (set by OP_DELTA; after OP or a delta of no changes, none), as the
  // (field, difference) pairs of its nonzero fields (a cache view moves in two or three of its dozens).
  struct NodeFields {
    std::vector<uint32_t> layout;
    std::vector<uint64_t> last;
    std::vector<std::pair<uint32_t, uint64_t>> stride;
  };
  std::vector<NodeFields> fields_;  // [node]; kept only with options_.compact
  // One step's op records until they are written: the executor's spans, each node's record form, the step's marker.
  // Two of them: a step runs in one while the previous step's records may still be written from the other.
  struct StepRecords {
    // [thread][node]: the executor's ticks, nanoseconds after spans_to_ns(). Sized for a new graph structure only:
    // each step of a graph writes every slot (see ExecObserver::span_slots).
    std::vector<std::vector<Span>> spans;
    // tick_count() and now_ns() read together before the graph runs and again after: ticks in between map linearly.
    uint64_t ticks_before = 0, ns_before = 0, ticks_after = 0, ns_after = 0;
    // Compact records (the step runs the previous step's graph, without value statistics): node i's choice,
    // ADVANCE for a repeatable node and made for names->compared[j] once j < chosen; a DELTA's changes are
    // changes[change_spans[i].first, change_spans[i].second).
    bool compact = false;
    size_t chosen = 0, full = 0;  // full: FULL choices among them
    std::vector<RecordChoice> choices;
    std::vector<std::pair<uint32_t, uint32_t>> change_spans;
    std::vector<std::pair<uint32_t, uint64_t>> changes;
    const GraphNames* names = nullptr;
    const Graph* graph = nullptr;
    trace::StepMarker marker;  // ended once the step has ended
    StepBuffers buffers;       // the buffer timeline's entry (times_at set as it is written)
    // Mixture-of-experts runs: the step's routing, copied at its end (the engine's tensors are overwritten by the
    // next step, in whose waits these records may be written). Row i is routing_rows[i]; its experts and weights are
    // [i * routing_k, (i + 1) * routing_k) of routing_experts and routing_weights, and when `predicted` of
    // routing_predicted (`run --moe-predict`).
    struct RoutingRow {
      uint16_t layer;
      int32_t token_pos;
      float margin;
      bool predicted;
    };
    std::vector<RoutingRow> routing_rows;
    std::vector<int32_t> routing_experts;
    std::vector<float> routing_weights;
    std::vector<int32_t> routing_predicted;
    size_t routing_k = 0;
    // Written at the step's end, or deferred to the next step's waits (previous_step_piece).
    bool deferred = false, begun = false;  // begun: STEP_BEGIN written
    size_t written = 0;                    // nodes whose records are written (write_records_piece)
    size_t routing_written = 0;            // routing rows written
  };
  // The step's routing (StepOutcome::routing) into r's routing rows.
  static void copy_routing(StepRecords& r, const StepOutcome& o);
  // The steps.jsonl line's `routing` field: per layer, the first token's position and each token's experts.
  static void write_routing_field(JsonLine& j, const StepRecords& r);
  StepRecords records_[2];
  int running_ = 0;  // records_[running_]: the running step's
  // Updates fields_[i] for ADVANCE and DELTA, and appends a DELTA's changes (field, difference) to r.changes.
  RecordChoice choose_record(StepRecords& r, size_t i);
  // Chooses the running step's next compared node's record; false once every node has one.
  bool choose_next_record();
  void choose(StepRecords& r, uint32_t i);  // node i's record choice (choose_record) and its changes' span
  // Idle work, on one thread at a time (idle_busy_), a piece at a time until stop.requested() or none is left: the
  // previous step's records, landscape, hash and line, then with `choose` choose_next_record. False once none is
  // left; true also when another thread holds idle_busy_.
  bool idle_pieces(bool choose, const IdleStop& stop);
  static bool idle_unit(void* self, const IdleStop& stop);  // IdleWork: idle_pieces(true, stop) on a waiting thread
  std::atomic<bool> idle_busy_{false};
  // The logits a run leaves in the arena, which the threads but thread 0 begin the landscape and hash of once the run
  // is done (between_runs_unit), while thread 0 samples and the step ends. Two, alternating by run: a thread late in
  // one run's between-runs work never reads the next run's entry, whose logits are not written yet. `state`: OPEN
  // until a thread takes it (OPENING, then BEGUN once pending_step_ is this step's) or thread 0 closes it at the
  // step's end (CLOSED; also when it gives a begun step up, after ending the pool's between-jobs work). Thread 0 does
  // not wait for a begun step's pieces it keeps: the step's end sets the fields they do not touch.
  enum RunLogitsState : uint8_t { OPEN, OPENING, BEGUN, CLOSED };
  struct RunLogits {
    Tracer* tracer = nullptr;
    std::span<const float> logits;
    StepRecords* records = nullptr;  // the run's (for the flush decision)
    std::atomic<uint8_t> state{CLOSED};
  };
  RunLogits run_logits_[2];
  int run_slot_ = 0;  // the running step's
  // IdleWork between runs: opens the run's step as pending_step_ (when the previous one is done) and does its
  // landscape and hash pieces until stopped (the next run, or the pool's end_between_jobs_work) or done with them.
  static bool between_runs_unit(void* ctx, const IdleStop& stop);
  Scheduling scheduling_;
  std::exception_ptr idle_failure_;       // thrown in a piece of idle work, rethrown on the run's thread
  std::atomic<bool> idle_failed_{false};  // a piece failed: no more idle work (the run ends with the failure)
  void keep_idle_failure();               // in a catch block of idle work
  std::vector<uint32_t> layout_scratch_;
  std::vector<uint64_t> fields_scratch_;
  void fill_placement(trace::OpRecord& r, const Node& n);  // every field of the op's tensors and ranges
  // Node i's SPAN records, then its OP_DELTA (the changes choose_record stored) or OP record.
  void write_op(const StepRecords& r, size_t i, RecordChoice choice);
  void write_io(const StepRecords& r, size_t i);  // node i's IO record (--io-trace)
  // Nodes [first, end) as one OP_ADVANCES_PACKED record.
  void write_advance_run(const StepRecords& r, size_t first, size_t end);
  std::vector<uint64_t> run_times_;  // write_advance_run's scratch, reused
  GraphNames intern_graph(const Graph& g, const AllocPlan& plan);
  struct KnownGraph {
    int id = 0;  // graphs/graph-<id>.json
    GraphNames names;
  };
  // Writes the step's STEP_BEGIN, spans and records and STEP_END a piece at a time: false once all are written.
  bool write_records_piece(StepRecords& r);
  void spans_to_ns(StepRecords& r);
  // Nanoseconds a counter tick, as a 32.32 fixed-point number, over an interval of `ticks` and `ns`; in r's step
  // (from its before and after readings).
  static unsigned __int128 tick_scale(uint64_t ticks, uint64_t ns);
  static unsigned __int128 tick_scale(const StepRecords& r);
  // A step's records (when they can wait), logit landscape, logits' hash and steps.jsonl line, made a piece at a time
  // while the threads wait at the next step's barriers (idle_unit), the rest at the next step's end, at a new graph
  // (on_graph_rebuild) or in finish().
  struct PendingStep {
    int32_t step = 0;
    Phase phase = Phase::PROMPT;
    int32_t pos_begin = 0, pos_end = 0;
    std::vector<int32_t> input_tokens;
    SampleResult sampled;
    bool end_of_generation = false;
    // The fields from `step` to here and `records` are set: false while only the logits are known (opened between
    // runs, between_runs_unit): the landscape and hash may go on, the records and line wait for on_step_end.
    bool outcome_known = false;
    int k = 0;  // top-k entries in the line
    // The step's: the engine's in place (they keep their bytes until the next step's output node, see idle_work_due)
    // or, given by another caller, in logits_copy_.
    std::span<const float> logits;
    bool logits_in_place = false;
    // Flush the logits' cache lines after their last read (the hash). Read by a waiting thread, they stay shared
    // with the core that wrote them, and the next step's output projection has to take each back before writing
    // it. Only when that node wrote a line of them every kFastLineNs or faster on each worker: then taking lines
    // back stalls its writes, while a slower writer hides that and the flush costs more than it saves
    // (docs/performance.md, "Tracing overhead").
    bool evict_logits = false;
    StepRecords* records = nullptr;           // not yet written (RECORDS)
    const StepRecords* routing = nullptr;     // the step's routing rows, for the line (none: a dense model)
    std::optional<WeightStepTotals> weights;  // --weight-budget
    LandscapeInPieces landscape;
    std::vector<float> top_logits;  // the landscape's top ids' logits and the chosen token's, for the line
    float chosen_logit = 0;
    ReadoutStats hidden_stats, logits_stats;
    uint64_t start_ns = 0, end_ns = 0, n_ops = 0;  // trace times
    int graph = 0;
    enum Stage { LANDSCAPE, HASH, RECORDS, TEXT } stage = LANDSCAPE;
    size_t hashed = 0;   // bytes of the logits in logits_hash_
    int next_piece = 0;  // TEXT: 0 the head; 1..k a top-k entry; k + 1 the rest, which appends it to steps_pending_
  };
  PendingStep pending_step_;
  std::atomic<bool> pending_{false};
  // pending_step_ from a step's logits (the landscape and hash can begin): the rest (the fields from `step` to
  // outcome_known, and `records`) is set by on_step_end.
  void begin_pending(std::span<const float> logits, bool in_place, bool evict);
  bool landscape_or_hash_pending() const {
    return pending_.load(std::memory_order_relaxed) && pending_step_.stage <= PendingStep::HASH;
  }
  std::vector<float> logits_copy_;
  // The first node of g writing any byte of `logits` (-1: none): the node the previous step's work is due before
  // (idle_work_due) and the one whose speed decides the flush (logits_written_fast). A patched graph writes the arena
  // where it did the step before, so the answer is kept while the graph's structure is (on_graph_ready forgets it
  // when the structure changes).
  int logits_writer(const Graph& g, std::span<const float> logits);
  struct LogitsWriter {
    const float* logits = nullptr;  // nullptr: no answer kept
    int node = -1;
  };
  LogitsWriter logits_writer_;
  static constexpr double kFastLineNs = 100;
  // Whether the node of r's step that wrote `logits` took under kFastLineNs a cache line of them on its slowest
  // worker (from r's spans, before they become nanoseconds).
  bool logits_written_fast(const StepRecords& r, std::span<const float> logits);
  Xxh3Stream logits_hash_;
  // Does the next piece of pending_step_'s work; false once the line is in steps_pending_ (or none is pending).
  bool previous_step_piece();
  void finish_previous_step();  // all of it
  std::string graph_key(const Graph& g);
  std::vector<uint8_t> key_bytes_;  // graph_key's scratch, reused
  std::string graph_json(const Graph& g) const;

  RunDirWriter& dir_;
  const Model& model_;
  TraceOptions options_;
  ThreadPool& pool_;
  int n_threads_;
  uint64_t t0_;
  trace::TraceWriter writer_;
  std::unique_ptr<std::ofstream> steps_stream_;
  std::string steps_pending_;  // steps.jsonl lines not yet written (flush_steps)
  void flush_steps();
  JsonLine step_line_;  // reused between steps

  // Current step.
  int32_t step_ = 0;
  Phase phase_ = Phase::PROMPT;
  uint64_t step_start_ = 0;
  const Graph* graph_ = nullptr;
  const AllocPlan* plan_ = nullptr;
  std::vector<trace::ValueStats> stats_;  // [node], with --trace-values

  // Whole run.
  std::map<std::string, KnownGraph> graphs_;  // by graph_key
  // The last graph seen and its structure (Graph::structure_id): seen again unchanged, it needs no new key.
  const Graph* last_graph_ = nullptr;
  uint64_t last_structure_id_ = 0;
  KnownGraph* last_known_ = nullptr;
  const GraphNames* names_ = nullptr;           // the current step's
  const GraphNames* previous_names_ = nullptr;  // the previous step's (same pointer: same graph)
  std::vector<int> step_graph_;
  static constexpr size_t kStepsReserved = 4096;  // steps whose per-step entries fit without growing
  std::vector<BufferEvent> buffer_events_;
  std::vector<StepBuffers> step_buffers_;
  // Per step, the run thread's span of every node (absolute ns), for the buffer timeline: the steps since the
  // last flush here, the earlier ones in the scratch file kNodeTimesFile (read back and removed by finish()).
  static constexpr const char* kNodeTimesFile = "buffer-times.tmp";
  std::vector<Span> node_times_;
  uint64_t node_times_written_ = 0;
  std::unique_ptr<std::fstream> node_times_file_;
  void flush_node_times();
  uint64_t arena_bytes_ = 0, scratch_bytes_ = 0, static_bytes_ = 0;
  trace::OpRecord record_;                // reused between ops
  std::optional<std::string> nonfinite_;  // first NaN/Inf seen with --check-finite

  // --io-trace and --prefetch.
  struct IoSlot {
    int proc_fd = -1;
    ThreadIoCounters begin;
  };
  Prefetcher* prefetcher_ = nullptr;
  std::optional<WeightLoadRecorder> weight_loads_;
  std::vector<IoSlot> io_slots_;                          // [thread]
  std::vector<std::vector<trace::IoWorker>> io_workers_;  // [thread][node]
  std::vector<std::vector<trace::IoRange>> io_ranges_;    // [node], measured on thread 0
  std::vector<unsigned char> mincore_buf_;
  trace::IoRecord io_record_;  // reused between ops

  static constexpr uint64_t kFlushIntervalNs = 500'000'000;  // steps are written to the files at least this often
  uint64_t last_flush_ns_ = 0;

  // The tracer's own cost: time spent in its callbacks on the run's thread (where it delays the next step), in
  // tick_count() units: every callback is timed, and a counter read costs less than a steady-clock read
  // (docs/performance.md). self_ns() converts them at the counter's rate over the run so far (tick_scale from
  // ticks0_, ns0_: the two read together at construction).
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
