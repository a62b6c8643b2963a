// Exporters: a loaded run directory (trace/run_data.h) written in formats other tools read (docs/export.md).
// Each writes atomically: a temporary name, renamed over `out` when complete, so `out` is never half-written.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trace/run_data.h"

namespace tt::exporter {

// Receives progress lines ("sqlite: step 12/64"); may be empty.
using Progress = std::function<void(std::string_view)>;

// Chrome trace-event JSON for ui.perfetto.dev and chrome://tracing: one track per worker, one slice per op and
// worker, steps on their own track, buffer occupancy counters.
std::string perfetto_json(const RunData& run, const Progress& progress = {});
void export_perfetto(const RunData& run, const std::string& out_path, const Progress& progress = {});

// SQLite database with tables run_info, steps, ops, op_inputs, ranges, spans, tensors, buffers, step_memory.
void export_sqlite(const RunData& run, const std::string& out_path, const Progress& progress = {});

// The per-token JSON layout (traces/, graphs/, memory-map.json, buffer-timeline.json) into directory `out_dir`.
void export_tokens_json(const RunData& run, const std::string& out_dir, const Progress& progress = {});

// A mixture-of-experts run's routing as one dense table (vLLM's routed-experts layout): tokens ((step, position)
// with routing) in execution order, the model's routed layers ascending, top_k slots in llama.cpp's order. A token
// a layer did not route (a prompt's last layer routes only the prompt's last token) has expert -1 and weight 0 there.
struct RoutingTable {
  std::vector<int> layers;  // model layer of each routed-layer index
  size_t top_k = 0;
  std::vector<std::pair<uint32_t, int32_t>> tokens;  // (step, position)
  std::vector<int16_t> experts;                      // [tokens][layers][top_k]
  std::vector<float> weights;                        // same shape
  size_t absent = 0;                                 // (token, layer) pairs without routing
};
// Throws tt::Error for a run without routing (not a mixture-of-experts run) or an expert id above int16's range.
RoutingTable routing_table(const RunData& run);

// Directory `out_dir`: expert_ids.npy int16, expert_weights.npy float32 [tokens, layers, top_k], tokens.npy int32
// [tokens, 2] (step, position), layers.npy int32 [layers] (NumPy's .npy format 1.0).
void export_routing_npy(const RoutingTable& table, const std::string& out_dir);
// CSV file: token, step, position, layer, slot, expert, weight (one row per routed slot).
void export_routing_csv(const RoutingTable& table, const std::string& out_path);

// Shared by the exporters.
// Fills a temporary directory through `fill` and renames it over `out_dir` when complete (replacing an earlier one).
void write_dir_atomic(const std::string& out_dir, const std::function<void(const std::filesystem::path&)>& fill);
std::string json_string(std::string_view s);  // a JSON string literal (invalid UTF-8 replaced)
std::string micros(uint64_t ns);              // ns as exact decimal µs: 1234567 -> "1234.567"

}  // namespace tt::exporter
