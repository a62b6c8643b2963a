// Exporters: a loaded run directory (trace/run_data.h) written in formats other tools read (docs/export.md).
// Each writes atomically: a temporary name, renamed over `out` when complete, so `out` is never half-written.
#pragma once

#include <functional>
#include <string>
#include <string_view>

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

// Shared by the exporters.
std::string json_string(std::string_view s);  // a JSON string literal (invalid UTF-8 replaced)
std::string micros(uint64_t ns);              // ns as exact decimal µs: 1234567 -> "1234.567"

}  // namespace tt::exporter
