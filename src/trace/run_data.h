// A whole run directory (docs/run-directory.md) loaded into memory: the one loader of run directories, which the
// analysis, the exporters, the web server, `dump` and `--prefetch from:RUN` share.
//
//   tt::RunData run = tt::load_run("runs/2026-...-stories260K");
//   for (const tt::trace::OpRecord& op : run.ops_of_step(0)) ...
//
// What is required: the directory must exist and hold trace.bin (with tracing on every run directory has one);
// a directory with neither trace.bin nor run.json is "not a run directory". A directory whose run did not finish
// (RUN_DIR.partial, after a kill) has no run.json, buffers.json or graphs/index.json: those are optional and
// their absence is listed in `warnings`. A truncated trace.bin (a kill mid-step) is loaded up to its last
// complete record: `trace.complete` is false and a warning says where reading stopped. Anything present but
// unreadable — invalid JSON, a wrong `format`, a missing field or one of the wrong type, a corrupt trace record — is a
// tt::Error naming the file and field (and line for steps.jsonl).
//
// Every step number, offset and length the trace gives is checked against what it describes before the loader
// returns, so no consumer sizes anything from an unchecked value: op, span and IO records belong to one of the
// trace's steps; MODEL_FILE bytes lie inside the model file (memory-map.json's file_size; a trace reading model
// bytes without one is an error); bytes of a runtime buffer lie inside that buffer as buffers.json gives it; a
// routing record names a layer with a router (`blk.N.ffn_gate_inp.weight` in memory-map.json) and experts below
// that router's expert count.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "trace/records.h"
#include "trace/trace_file.h"

namespace tt {

// One line of steps.jsonl (the typed fields; `json` keeps the whole line: top_k, stats, entropy, ...).
struct RunStep {
  uint32_t step = 0;
  Phase phase = Phase::PROMPT;
  int32_t pos_begin = 0, pos_end = 0;
  std::vector<int32_t> input_tokens;
  std::optional<int32_t> token;  // chosen from this step's logits (none: nullopt)
  std::string token_text;
  uint64_t start_ns = 0, end_ns = 0;  // ns since the run started
  uint32_t n_ops = 0;
  int graph = -1;  // graph id (graphs/graph-NNNN.json)
  nlohmann::json json;
};

// One tensor of memory-map.json (docs/memory-map.md).
struct MapTensor {
  std::string name;
  std::string type;                                           // as llama.cpp prints it: "F32", "Q4_K", ...
  std::vector<int64_t> shape;                                 // ggml order
  uint64_t offset_start = 0, offset_end = 0, size_bytes = 0;  // absolute file offsets
  std::optional<int> layer;
  std::string category, component;
  size_t index = 0;  // position in memory-map.json's tensors
};

// One section of the model file (memory-map.json `sections`: header, tensor data, ...).
struct MapSection {
  std::string name;
  uint64_t begin = 0, end = 0;
};

// What a runtime buffer holds. buffers.json has no column for it: the loader derives it from the buffer id as
// docs/run-directory.md fixes them (0 inputs, 1 activation arena, 2 scratch, 3 + 2·layer K cache, 4 + 2·layer V
// cache), in buffer_of_id alone.
enum class BufferKind : uint8_t { INPUTS, ACTIVATION_ARENA, SCRATCH, K_CACHE, V_CACHE };

struct RunBuffer {
  int32_t id = -1;
  BufferKind kind = BufferKind::INPUTS;
  int layer = -1;  // K_CACHE, V_CACHE
  Pool pool = Pool::ACTIVATION;
  std::string name;   // "inputs", "activation arena", "scratch", "K cache L3", ...
  uint64_t size = 0;  // the furthest byte buffers.json's events reach (without buffers.json: the trace's ranges)
};

// One row of buffers.json `events`.
struct BufferEvent {
  uint64_t t_ns = 0;
  uint32_t step = 0;
  bool alloc = true;  // kind "a"; false: "f" (free)
  Pool pool = Pool::ACTIVATION;
  int32_t buffer_id = -1;
  uint64_t offset = 0, bytes = 0;
  std::string tensor;  // as written
  bool reuse = false;
  // The whole buffer grew to `bytes`, and `grown` is its name as the tracer gives it ("activations", "scratch").
  // buffers.json has no column for it: the loader derives it from the tensor column, "<buffer> (grow)".
  bool growth = false;
  std::string grown;
  nlohmann::json to_json() const;  // the row as buffers.json has it
};

// One entry of buffers.json `steps`: the step's activation peak (bytes, and the node at which it occurs), the arena,
// scratch and static (KV cache) bytes, and the total peak.
struct BufferStep {
  uint32_t step = 0;
  uint64_t activation_peak_bytes = 0;
  std::string activation_peak_node;
  uint64_t arena_bytes = 0, scratch_bytes = 0, static_bytes = 0, total_peak_bytes = 0;
  nlohmann::json to_json() const;  // as buffers.json has it
};

// The fields of run.json the readers use (the whole file stays in RunData::run).
struct RunInfo {
  bool has_model = false;  // run.json has `model`
  std::string model_file;
  uint64_t model_size_bytes = 0;
  bool has_options = false;    // run.json has `options`
  std::optional<int> threads;  // options.threads
  struct Sampling {
    double temperature = 0;
    uint64_t seed = 0;
  };
  std::optional<Sampling> sampling;  // options.sampling
  std::optional<uint64_t> load_ns;   // timings.load_ns
  std::string prompt, generated_text, date;
  // weight_cache: a `run --weight-budget` run's cache (docs/run-directory.md#weight-budget).
  struct WeightCache {
    std::string budget, policy, prefetch = "none";
    uint64_t budget_bytes = 0, page_bytes = 4096;
    uint32_t n_phases = 0;  // the policy's phases: the embedding, one per layer, the rest (2 to 65,538)
    bool direct_io = false;
    double read_bytes_per_s = 0;
    struct Storage {  // `bench --io`'s rates, when recorded
      double sequential_bytes_per_s = 0, random_4k_bytes_per_s = 0;
      std::string method;
    };
    std::optional<Storage> storage;
  };
  std::optional<WeightCache> weight_cache;
};

struct LoadOptions {
  bool trace = true;    // read trace.bin (the largest file); false: leave `trace` empty
  bool graphs = true;   // read graphs/graph-*.json
  bool buffers = true;  // read buffers.json (always read with the trace: it bounds the trace's buffer ranges)
};

struct RunData {
  std::string dir;
  bool finished = false;  // run.json exists: the run completed and its directory was committed

  nlohmann::json run;                      // run.json (null when absent)
  RunInfo info;                            // run.json's typed fields (defaults when absent)
  nlohmann::json memory_map;               // memory-map.json (null when absent)
  std::optional<uint64_t> file_size;       // memory-map.json's file_size
  std::string model_name, model_path;      // memory-map.json's model_name, file ("" when absent)
  std::vector<MapTensor> tensors;          // memory_map's tensors, sorted by offset_start
  std::vector<MapSection> sections;        // memory_map's sections, by name
  std::vector<RunStep> steps;              // steps.jsonl, indexed by step
  std::vector<nlohmann::json> graphs;      // graph id -> graphs/graph-NNNN.json
  bool has_buffers = false;                // buffers.json was read
  std::vector<BufferEvent> buffer_events;  // buffers.json events, in file order (time order per step)
  std::vector<RunBuffer> buffers;          // by id: buffers.json's, else those the trace names
  std::vector<BufferStep> buffer_steps;    // buffers.json `steps`: per-step peaks
  uint64_t peak_bytes = 0;
  trace::TraceContents trace;         // trace.bin; ops in step order, then node order
  std::vector<std::string> warnings;  // optional files absent, truncated trace, counts that disagree

  // Workers: run.json options.threads, else 1 + the highest thread seen in the trace's spans.
  int n_threads() const;
  // Trace ops of one step (empty for a step not in the trace).
  std::span<const trace::OpRecord> ops_of_step(uint32_t step) const;
  // Trace spans of one step.
  std::span<const trace::SpanRecord> spans_of_step(uint32_t step) const;
  // Routing rows of one step (mixture-of-experts runs; empty otherwise), by layer, then token position.
  std::span<const trace::RoutingRecord> routing_of_step(uint32_t step) const;
  // Those of one layer (empty for a layer without routing).
  std::span<const trace::RoutingRecord> routing_of_layer(uint32_t step, int layer) const;
  // The step's graph JSON, or nullptr when unknown.
  const nlohmann::json* graph_of_step(uint32_t step) const;
  // The model tensor containing this absolute file offset, or nullptr (padding, header).
  const MapTensor* tensor_at(uint64_t file_offset) const;
  const MapTensor* tensor_named(const std::string& name) const;
  // Model hyperparameters from run.json (model.config), null when absent.
  const nlohmann::json& model_config() const;

  // [first, last) index into trace.ops / trace.spans / trace.routing per step; filled by load_run.
  std::vector<std::pair<size_t, size_t>> step_ops, step_spans, step_routing;
};

// Loads `dir` (see the top of this file for what is required). Throws tt::Error.
RunData load_run(const std::string& dir, const LoadOptions& options = {});

// Layer of a tensor from its name: "blk.N." (weights), "-N" suffix (Qcur-3), "_lN" (cache_k_l3, with or without
// " (view)"). nullopt for global tensors.
std::optional<int> layer_from_name(std::string_view name);

}  // namespace tt
