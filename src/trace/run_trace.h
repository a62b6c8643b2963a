// A run directory's trace.bin checked against the run's other files: what every loader of run directories
// (analysis::load_run, tt::load_run, serve::ServedRun) reads the trace through, so no consumer sizes anything from an
// unchecked step number, offset or length.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "trace/trace_file.h"

namespace tt::trace {

// The trace of run directory `dir`, checked against the run before any consumer sizes anything from it: every op,
// span and IO record belongs to one of the trace's steps, and every MODEL_FILE byte it names lies inside the model
// file, whose size is `memory_map`'s file_size (memory-map.json; null or {} when the directory has none, and then a
// trace naming model bytes is an error).
TraceContents read_run_trace(const std::string& dir, const nlohmann::json& memory_map);
// The checks of read_run_trace on a trace already read; `path` names it in messages.
void check_run_trace(const TraceContents& t, const nlohmann::json& memory_map, const std::string& path);

}  // namespace tt::trace
