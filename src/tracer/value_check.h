// Per-op value statistics (`run --trace-values`: min, max, mean, NaN and Inf counts, hash of each op's output) and the
// finite check (`run --check-finite`: the run stops at the step of the first NaN or Inf, naming the op).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "trace/records.h"

namespace tt {

class ValueCheck {
 public:
  ValueCheck(bool values, bool check_finite) : values_(values), check_finite_(check_finite) {}
  bool wanted() const { return values_ || check_finite_; }
  void on_graph_ready(size_t n_nodes, int32_t step);
  // On thread 0 once every thread has finished node `node`.
  void on_node_done(int node, const Node& n);
  // Node i's statistics in this step (nullptr: none kept).
  const trace::ValueStats* stats(size_t node) const { return stats_.empty() ? nullptr : &stats_[node]; }
  // At the step's end, after its records: fails naming the first NaN or Inf seen with check_finite.
  void check() const;

 private:
  bool values_, check_finite_;
  int32_t step_ = 0;
  std::vector<trace::ValueStats> stats_;  // [node]
  std::optional<std::string> nonfinite_;
};

}  // namespace tt
