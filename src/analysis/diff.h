// Difference of two runs (tensortrace diff): steps aligned by index, ops within a step by node name (the k-th op
// named N in A with the k-th op named N in B). Reports token differences, the first op whose output differs beyond
// a tolerance (needs --trace-values in both runs), and per-op time and byte differences.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "analysis/analysis.h"

namespace tt::analysis {

struct DiffOptions {
  // 0: an op differs when its output hash differs. > 0: when min, max or mean differ by more than
  // tolerance * max(1, |a|, |b|) (absolute for values up to 1, relative above), or NaN/Inf counts differ.
  double tolerance = 0;
  int top = 10;  // ops listed in the time and byte tables
};

nlohmann::json diff_runs(const RunData& a, const RunData& b, const DiffOptions& options);
std::string render_diff_text(const nlohmann::json& diff);

}  // namespace tt::analysis
