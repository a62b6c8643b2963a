// Analysis of one run directory (docs/analysis.md): order of the model-file reads, hot and cold bytes, file versus
// runtime buffers, predictability of the next access, memory pressure, speed against the measured memory
// bandwidth, I/O (with `run --io-trace`) and cache simulation. The report is JSON; the text report and the SVG
// figures are rendered from it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/cache_sim.h"
#include "trace/trace_file.h"

namespace tt::analysis {

// The files of a run directory, read as they are (docs/run-directory.md).
struct RunFiles {
  std::string dir;
  trace::TraceContents trace;
  nlohmann::json run;                 // run.json (empty object when absent: a .partial directory)
  nlohmann::json memory_map;          // memory-map.json
  nlohmann::json buffers;             // buffers.json (empty object when absent)
  std::vector<nlohmann::json> steps;  // steps.jsonl
};
RunFiles load_run(const std::string& dir);  // throws tt::Error

enum class Granularity { PAGE, TENSOR };

constexpr uint64_t kMaxPageBytes = uint64_t{1} << 30;
struct AnalyzeOptions {
  std::vector<uint64_t> cache_sizes;  // empty: no cache simulation
  std::vector<CachePolicy> policies = {CachePolicy::LRU, CachePolicy::LFU, CachePolicy::FIFO, CachePolicy::OPT};
  Granularity granularity = Granularity::PAGE;
  uint64_t page_bytes = 4096;     // 1 to kMaxPageBytes
  bool measure_bandwidth = true;  // off in tests that do not look at it
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

nlohmann::json analyze_run(const RunFiles& run, const AnalyzeOptions& options);

// IO records (run --io-trace) summed per run and per step; null when the trace has none.
nlohmann::json io_summary(const trace::TraceContents& t);

// Two runs of the same model (e.g. cold without and with --prefetch): time to first token, stall time, bytes read.
nlohmann::json compare_runs(const RunFiles& a, const RunFiles& b);

std::string render_text(const nlohmann::json& report);
std::string render_comparison_text(const nlohmann::json& comparison);

// Writes miss-ratio-curve.svg, bytes-per-step.svg, time-per-layer.svg into dir; returns the file names.
std::vector<std::string> write_figures(const nlohmann::json& report, const std::string& dir);

}  // namespace tt::analysis
