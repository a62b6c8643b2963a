#include "analysis/sample_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"

namespace tt::analysis {

SampleSummary summarize(std::span<const double> values) {
  SampleSummary s;
  s.n = values.size();
  if (values.empty()) return s;
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(s.n);
  double squares = 0;
  for (double x : values) squares += (x - s.mean) * (x - s.mean);
  s.std = s.n > 1 ? std::sqrt(squares / static_cast<double>(s.n - 1)) : 0;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  const size_t mid = s.n / 2;
  s.median = s.n % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  return s;
}

MedianInterval median_interval(std::span<const double> values, double confidence) {
  if (!(confidence > 0 && confidence < 1)) fail("median interval: confidence {} is not in (0, 1)", confidence);
  const size_t n = values.size();
  if (n == 0) return {};
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  // tail[j] = P(X <= j) for X ~ Binomial(n, 1/2), in logs: n is a repetition count, but 2^-n underflows past ~1000.
  const double tail_allowed = (1 - confidence) / 2, log_half_n = static_cast<double>(n) * std::log(0.5);
  double below = 0;  // P(X < k) as k grows
  size_t k = 1;      // 1-based order statistic: P(X < 1) = P(X = 0)
  for (;; ++k) {
    const double p_equal = std::exp(std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(k)) -
                                    std::lgamma(static_cast<double>(n - k + 2)) + log_half_n);  // P(X = k - 1)
    if (below + p_equal > tail_allowed || k > n / 2) break;
    below += p_equal;
  }
  // k - 1 is the largest order statistic whose lower tail fits; none fits: the whole range.
  const size_t low = std::max<size_t>(k - 1, 1);
  if (k - 1 == 0) below = std::exp(log_half_n);  // P(X < 1) for the whole range [x_(1), x_(n)]
  return {sorted[low - 1], sorted[n - low], std::max(0.0, 1 - 2 * below)};
}

Verdict compare_median(const MedianInterval& interval, double threshold) {
  if (interval.low >= threshold) return Verdict::kAbove;
  if (interval.high < threshold) return Verdict::kBelow;
  return Verdict::kUndecided;
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kAbove:
      return "met";
    case Verdict::kBelow:
      return "not met";
    case Verdict::kUndecided:
      return "undecided";
  }
  return "undecided";
}

}  // namespace tt::analysis
