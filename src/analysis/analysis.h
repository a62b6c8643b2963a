// Analysis of one run directory (docs/analysis.md): order of the model-file reads, hot and cold bytes, file versus
// runtime buffers, predictability of the next access, memory pressure, speed against the measured memory
// bandwidth, I/O (with `run --io-trace`) and cache simulation. Each section is computed by its own function into a
// struct; the JSON report (to_json), the text report (render_text) and the SVG figures are made from the structs.
// The per-layer, per-op-kind, per-step and per-tensor figures defined here are the ones `serve` shows too.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analysis/bandwidth.h"
#include "analysis/cache_sim.h"
#include "analysis/moe.h"
#include "analysis/weight_cache.h"
#include "trace/run_data.h"

namespace tt::analysis {

enum class Granularity { PAGE, TENSOR };

constexpr uint64_t kMaxPageBytes = uint64_t{1} << 30;
struct AnalyzeOptions {
  std::vector<uint64_t> cache_sizes;  // empty: no cache simulation
  std::vector<CachePolicy> policies = {CachePolicy::LRU, CachePolicy::LFU, CachePolicy::FIFO, CachePolicy::OPT};
  Granularity granularity = Granularity::PAGE;
  uint64_t page_bytes = 4096;           // 1 to kMaxPageBytes
  bool measure_bandwidth = true;        // off in tests that do not look at it
  ExpertCacheOptions experts;           // mixture-of-experts runs: the expert-cache replay (no sizes: none)
  std::optional<StorageRates> storage;  // `bench --io`'s rates, shown beside a budgeted run's read rate
};

// One read of model-file bytes by an op, in trace order.
struct FileRead {
  uint32_t step = 0, node = 0;
  size_t op = 0;  // index into TraceContents::ops
  int16_t layer = -1;
  std::string tensor;
  uint64_t tensor_offset = 0, tensor_bytes = 0;
  uint64_t offset = 0, length = 0;
};
std::vector<FileRead> file_reads(const trace::TraceContents& t);

// The access stream a cache sees: pages of page_bytes touched by each read (consecutive repeats within an op
// merged), or whole tensors.
std::vector<Access> access_stream(const std::vector<FileRead>& reads, Granularity g, uint64_t page_bytes);

// ---- Order of the model-file reads ----
constexpr int kNumJumpBins = 11;
extern const char* const kJumpBins[kNumJumpBins];  // signed jump from the end of one read to the start of the next
struct OrderStats {
  uint64_t reads = 0, bytes = 0, transitions = 0, forward = 0, contiguous = 0, backward = 0;
  std::array<uint64_t, kNumJumpBins> hist{};
  uint64_t layer_backward = 0;  // a read of a lower layer after a higher one in the same step
  std::vector<int> layers;      // layer visit sequence (consecutive duplicates merged)
  uint64_t steps = 0, steps_with_layers_ascending = 0;
  double forward_fraction() const { return transitions ? static_cast<double>(forward) / transitions : 1.0; }
  double contiguous_fraction() const { return transitions ? static_cast<double>(contiguous) / transitions : 0.0; }
};
struct OrderStep {
  uint32_t step = 0;
  std::string phase;
  OrderStats stats;
  std::optional<bool> same_reads_as_previous, same_tensors_as_previous;  // when the previous step read too
};
struct OrderSection {
  OrderStats run;
  std::map<std::string, OrderStats> phases;
  std::vector<OrderStep> steps;
  uint64_t steps_compared = 0, same_reads = 0, same_tensors = 0;
};
OrderSection order_section(const trace::TraceContents& t, const std::vector<FileRead>& reads);

// ---- Hot and cold bytes ----
// The model-file reads of one tensor (by the name the trace gives its input): the one definition of a tensor's reads
// (`analyze`'s hot_cold.tensors, the viewer's hottest tensors).
struct TensorReads {
  uint64_t reads = 0, bytes = 0;
  std::vector<uint32_t> steps;                           // distinct, ascending
  std::vector<std::pair<uint64_t, uint64_t>> intervals;  // [begin, end) of each read
};
std::map<std::string, TensorReads> tensor_reads(const std::vector<FileRead>& reads);

struct TensorHeat {
  const MapTensor* tensor = nullptr;
  uint64_t reads = 0, bytes_read = 0, distinct_bytes_read = 0, never_read_bytes = 0, steps_reading = 0;
};
struct RegionHeat {
  std::string section;  // sections only
  uint64_t begin = 0, end = 0, bytes_read = 0, distinct_bytes_read = 0;
};
struct MissPoint {
  uint64_t capacity = 0, misses = 0;
  double miss_ratio = 0;
};
struct HotColdSection {
  std::vector<TensorHeat> tensors;  // by bytes read, most first
  std::vector<RegionHeat> sections, regions;
  uint64_t file_bytes = 0, distinct_bytes_read = 0, tensor_bytes = 0, tensor_bytes_never_read = 0;
  uint64_t page_bytes = 0, accesses = 0, cold = 0, unique_bytes = 0;
  std::map<int, uint64_t> reuse_bins;  // log2 of the LRU capacity an access needs to hit -> accesses
  std::vector<MissPoint> lru_miss_ratio_curve;
};
HotColdSection hot_cold_section(const RunData& run, const std::vector<FileRead>& reads, uint64_t page_bytes);

// ---- Time and bytes per pool: per run, phase, step, layer and op kind ----
constexpr int kNumPools = 5;  // Pool::MODEL_FILE .. Pool::SCRATCH
// Ops' time and the bytes they read, by pool (views left out: they read nothing). An op's time is split over the
// pools it reads in proportion to the bytes.
struct PoolTotals {
  std::array<uint64_t, kNumPools> bytes{};
  std::array<double, kNumPools> ns{};
  uint64_t op_ns = 0, ops = 0;
  void add(const trace::OpRecord& o);
  uint64_t total_bytes() const;
  double bytes_per_s() const { return op_ns ? total_bytes() / (op_ns / 1e9) : 0.0; }
};
struct StepTotals {
  uint32_t step = 0;
  std::string phase;
  std::optional<uint64_t> step_ns;  // STEP_BEGIN to STEP_END
  PoolTotals totals;
};
// The one definition of the per-layer, per-op-kind and per-step figures (`analyze`'s sources and speed, the viewer's
// summary).
struct SourcesSection {
  PoolTotals run;
  std::map<std::string, PoolTotals> phases;
  std::vector<StepTotals> steps;
  std::map<int, PoolTotals> layers;                          // -1: no layer
  std::vector<std::pair<std::string, PoolTotals>> op_kinds;  // by op time, most first
};
SourcesSection sources_section(const trace::TraceContents& t);

// ---- Speed against the measured memory bandwidth ----
struct SpeedSection {
  std::optional<Bandwidth> bandwidth;  // measured (AnalyzeOptions::measure_bandwidth)
  double achieved_bytes_per_s = 0, achieved_fraction_of_bandwidth = 0;
  std::string fastest_op_kind;
  double fastest_bytes_per_s = 0, fastest_fraction_of_bandwidth = 0;
};
SpeedSection speed_section(const SourcesSection& sources, int threads, bool measure_bandwidth);

// ---- Predictability of the next model-file access ----
struct PredictorScore {
  struct Step {
    uint64_t step = 0, accesses = 0, hits = 0;
  };
  uint64_t hits = 0, accesses = 0;
  std::vector<Step> steps;
};
// Predictor name -> score (same_as_last_step, last_successor, most_frequent_successor), trained on earlier steps.
using Predictability = std::map<std::string, PredictorScore>;
struct PredictabilitySection {
  Predictability ranges, tensors;
};
PredictabilitySection predictability_section(const std::vector<FileRead>& reads);

// ---- Memory pressure (buffers.json) ----
struct PoolPeak {
  std::string pool;
  uint64_t peak_bytes = 0, t_ns = 0, step = 0;
  std::vector<std::pair<std::string, uint64_t>> live;  // tensors live at the peak, largest first
};
struct MemorySection {
  bool has_buffers = false;
  std::vector<PoolPeak> pools;
  std::map<std::string, uint64_t> buffer_sizes;  // growth events: the arena and scratch sizes
  uint64_t total_peak_bytes = 0;
};
MemorySection memory_section(const RunData& run);

// ---- Cache simulation ----
struct CacheSimSection {
  Granularity granularity = Granularity::PAGE;
  uint64_t page_bytes = 0, accesses = 0, bytes_accessed = 0, unique_bytes = 0;
  std::vector<CacheResult> results;
};
CacheSimSection cache_sim_section(const std::vector<FileRead>& reads, const AnalyzeOptions& options);

// The whole report.
struct Report {
  std::string run_dir;
  bool has_model = false;
  std::string model_file;
  uint64_t model_size_bytes = 0;
  int threads = 1;
  uint64_t n_steps = 0, n_ops = 0;
  bool trace_complete = true;
  std::string trace_stop_reason;
  OrderSection order;
  HotColdSection hot_cold;
  SourcesSection sources;
  SpeedSection speed;
  nlohmann::json thread_time;  // thread_time.h
  PredictabilitySection predictability;
  nlohmann::json io;  // io_summary; null without IO records
  MemorySection memory;
  std::optional<CacheSimSection> cache_sim;
  std::optional<MoeSection> moe;                   // runs with routing records
  std::optional<WeightCacheSection> weight_cache;  // `run --weight-budget` runs
  // `analyze A B ... --expert-cache`: the replay of every run's routing as one workload (set by the caller).
  std::optional<PooledExpertCache> pooled;
};
Report analyze(const RunData& run, const AnalyzeOptions& options);  // throws tt::Error (options out of range)

nlohmann::json to_json(const Report& report);  // `analyze --json` (docs/analysis.md)
// The expert-cache replay's table (`moe.expert_cache`, `pooled` and the viewer's /expert-cache), `tokens` routed.
nlohmann::json expert_cache_json(const std::vector<ExpertCacheResult>& cache, uint64_t tokens, CacheScope scope,
                                 Prefetch prefetch, const ReadRate& rate);
std::string render_text(const Report& report);
// Writes miss-ratio-curve.svg, bytes-per-step.svg, time-per-layer.svg (and for MoE runs expert-picks.svg and, with an
// expert-cache replay, expert-cache.svg) into dir; returns the file names.
std::vector<std::string> write_figures(const Report& report, const std::string& dir);

inline nlohmann::json analyze_run(const RunData& run, const AnalyzeOptions& options) {
  return to_json(analyze(run, options));
}

// IO records (run --io-trace) summed per run and per step; null when the trace has none.
nlohmann::json io_summary(const trace::TraceContents& t);

// What a run's workers read from storage (IO records, run --io-trace) and the wall time of the ops during which they
// read: the storage read rate the run measured.
struct StorageReads {
  uint64_t bytes = 0, ns = 0;
  double bytes_per_s() const { return ns ? static_cast<double>(bytes) * 1e9 / static_cast<double>(ns) : 0.0; }
};
StorageReads storage_reads(const trace::TraceContents& t);

// Two runs of the same model (e.g. cold without and with --prefetch): time to first token, stall time, bytes read.
nlohmann::json compare_runs(const RunData& a, const RunData& b);
std::string render_comparison_text(const nlohmann::json& comparison);

}  // namespace tt::analysis
