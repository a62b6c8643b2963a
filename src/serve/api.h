// The viewer's JSON API (docs/viewer.md), independent of HTTP: `tensortrace serve` (tools/serve.cpp) maps requests
// to Api::handle. Each run directory is loaded once (trace indexed by step and by time) and answers range queries,
// so a long trace opens without sending everything.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analysis/weight_cache.h"
#include "trace/run_data.h"

namespace tt::serve {

using Params = std::map<std::string, std::string>;

struct Response {
  int status = 200;
  std::string body;  // JSON
};

// One loaded run directory (tt::load_run), indexed for the viewer's range queries.
class ServedRun {
 public:
  explicit ServedRun(const std::string& dir);  // throws tt::Error when it is not a readable run directory
  ServedRun(const ServedRun&) = delete;        // members refer into run_
  ServedRun& operator=(const ServedRun&) = delete;

  const std::string& dir() const { return dir_; }
  nlohmann::json summary_entry(size_t index) const;  // for /api/runs

  nlohmann::json run_json() const;
  const nlohmann::json& memory_map() const { return memory_map_; }
  nlohmann::json steps(const Params& p) const;
  nlohmann::json ops(const Params& p) const;
  nlohmann::json spans(const Params& p) const;
  nlohmann::json graph(const Params& p) const;
  nlohmann::json buffers(const Params& p) const;
  nlohmann::json heatmap(const Params& p) const;
  const nlohmann::json& summary() const { return summary_; }
  // Mixture-of-experts runs: the routing as one table (export/export.h RoutingTable); 404 for a dense run.
  nlohmann::json routing() const;
  // Mixture-of-experts runs: `analyze --expert-cache`'s replay (analysis::pooled_expert_cache of this run) for the
  // sizes, policies, scope and prefetch asked (docs/viewer.md); 404 for a dense run, 400 for a bad parameter.
  nlohmann::json expert_cache(const Params& p) const;
  // `run --weight-budget` runs: the budget and policy, the loads (WEIGHT_LOAD records) of a step or time window, one
  // page of them, per-step totals and the cache's occupancy over the window (docs/viewer.md); 404 for a run without
  // a budget, 400 for a bad parameter.
  nlohmann::json weight_cache(const Params& p) const;

  // A byte range touched by an op, reduced to what the heatmap needs.
  struct Touch {
    int32_t buffer_id;  // -1: model file
    uint64_t offset, length;
    bool write;
  };

 private:
  void index_trace();
  void load_buffers();
  void load_weight_cache();
  nlohmann::json op_row(size_t i) const;
  nlohmann::json compute_summary() const;
  size_t n_steps() const { return run_.step_ops.size(); }
  uint32_t parse_step(const Params& p, const char* key, uint32_t dflt) const;

  std::string dir_;
  RunData run_;
  nlohmann::json memory_map_;  // as the viewer gets it: memory-map.json, or no tensors when absent
  const std::vector<trace::StepMarker>& markers_ = run_.trace.steps;
  const std::vector<trace::OpRecord>& ops_ = run_.trace.ops;
  const std::vector<std::pair<size_t, size_t>>& step_ops_ = run_.step_ops;  // step -> [first, last) in ops_
  std::vector<std::string> lower_names_;                                    // ops_[i].name in lower case (name filter)
  nlohmann::json summary_;
  std::vector<trace::SpanRecord> spans_;  // sorted by start
  uint64_t max_span_ns_ = 0, t_end_ns_ = 0;
  int n_threads_ = 0;
  bool complete_ = true;
  std::string stop_reason_;

  // Every distinct range read or written, with the steps touching it (sorted, repeated when touched several times
  // in a step): most ranges recur every step, so a cumulative heatmap costs O(distinct ranges), not O(steps).
  struct UniqueTouch {
    Touch t;
    std::vector<uint32_t> steps;
  };
  std::vector<UniqueTouch> touches_;

  // buffers.json: a live-bytes series per pool
  std::vector<std::string> buffer_pools_;         // pool names in the series
  std::vector<uint64_t> live_t_;                  // event times
  std::vector<std::vector<int64_t>> live_bytes_;  // [pool][event index] live bytes after the event
  uint64_t peak_bytes_ = 0, peak_t_ = 0;

  // `run --weight-budget`: analyze's weight-cache section (its replay gives the occupancy after each load), or why
  // run.json's weight_cache cannot be read; the occupancy as a series by the loads' end times.
  std::optional<analysis::WeightCacheSection> weight_cache_;
  std::string weight_cache_error_;
  std::string budget_;  // run.json's weight_cache.budget: the option as given
  bool direct_io_ = false;
  std::vector<uint64_t> resident_t_, resident_bytes_;
  uint64_t peak_resident_ = 0;
};

class Api {
 public:
  explicit Api(const std::vector<std::string>& run_dirs);  // loads every run; throws tt::Error
  // path: the decoded request path beginning with /api/; params: the query parameters.
  Response handle(const std::string& path, const Params& params) const;
  size_t run_count() const { return runs_.size(); }
  const ServedRun& run(size_t i) const { return *runs_[i]; }

 private:
  std::vector<std::unique_ptr<ServedRun>> runs_;
};

// Whether a request's Host header names this server: localhost, 127.0.0.1, [::1] or one of `names` (bare host
// names or addresses: what --host names, the address the connection arrived at), case-insensitive, with or without
// a port. Any other name may be another site's page reaching the server through DNS rebinding.
bool host_allowed(const std::string& host_header, const std::vector<std::string>& names);

// Thrown by parameter checks: becomes a 4xx JSON error.
struct ApiError {
  int status;
  std::string message;
};

}  // namespace tt::serve
