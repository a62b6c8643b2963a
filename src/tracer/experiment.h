// One experiment: load a model, generate from a prompt, and (unless tracing is off) write the run directory.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/generate.h"
#include "tracer/tracer.h"

namespace tt {

struct ExperimentOptions {
  std::string model_path;
  std::string prompt;
  int32_t n_predict = 64;
  int n_threads = 1;
  int32_t n_ctx = 0;
  GgmlType kv_type = GgmlType::F16;
  LlamaCppBuild llamacpp_build = default_llamacpp_build();  // --llamacpp-build
  bool moe_predict = false;                                 // --moe-predict (EngineOptions::moe_predict)
  SamplingParams sampling;
  bool trace = true;
  std::string run_dir;     // empty: runs/<date-time>-<model>, with -2, -3, ... when that is taken
  bool overwrite = false;  // replace an existing run_dir and a stale run_dir.partial (needs run_dir)
  TraceOptions trace_options;
  bool progress = true;  // progress lines on stderr
  bool cold = false;     // --cold: evict the model file from the page cache after loading, before the first step
  bool mmap = false;     // --mmap: map the model file in place instead of reading it into memory at load
  // --prefetch: none, next-layer, from:RUN_DIR (needs tracing); with --weight-budget also predicted (WeightStore)
  std::string prefetch = "none";
  // --weight-budget SIZE (empty: weights used from the file mapping), --cache-policy, --direct-io
  // (model/weight_store.h).
  std::string weight_budget;
  std::string cache_policy = "lru";  // lru, lfu, fifo, lru-2, least-stale, opt-from:RUN_DIR
  bool direct_io = false;
  std::string config_file;  // --config: the file's absolute path (run.json records it); empty: none
  nlohmann::json config = nlohmann::json::object();  // the values read from it, by key
  // When set and true, the run stops after the current step and finishes its run directory (run.json: interrupted).
  const std::atomic<bool>* stop = nullptr;
};

struct ExperimentResult {
  std::string run_dir;  // empty when not traced
  std::vector<int32_t> prompt_tokens;
  GenerateResult generation;
  uint64_t load_ns = 0;
  uint64_t runtime_bytes = 0, kv_cache_bytes = 0;
  nlohmann::json run_json;
};

// on_text receives generated text as it is produced; on_ready is called once the model has loaded and the run is set
// up, just before the first step. Throws tt::Error; no partial run directory remains then.
ExperimentResult run_experiment(const ExperimentOptions& options, const std::function<void(std::string_view)>& on_text,
                                const std::function<void()>& on_ready = nullptr);

// runs/<date-time>-<model>: the default run directory before any -2, -3, ... suffix.
std::string default_run_dir(const std::string& model_path);

}  // namespace tt
