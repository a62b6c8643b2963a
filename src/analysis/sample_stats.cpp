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
  // The interval [x_(low), x_(n+1-low)] misses the median on each side with probability P(X < low), X ~ Binomial(n,
  // 1/2): low grows from 1 (the whole range) while that tail stays within what the confidence allows. In logs: n is a
  // repetition count, but 2^-n underflows past ~1000.
  const double allowed = (1 - confidence) / 2, log_half_n = static_cast<double>(n) * std::log(0.5);
  auto p_equal = [&](size_t j) {  // P(X = j)
    const double dn = static_cast<double>(n), dj = static_cast<double>(j);
    return std::exp(std::lgamma(dn + 1) - std::lgamma(dj + 1) - std::lgamma(dn - dj + 1) + log_half_n);
  };
  size_t low = 1;
  double tail = p_equal(0);  // P(X < low)
  while (low < n / 2 && tail + p_equal(low) <= allowed) tail += p_equal(low++);
  return {sorted[low - 1], sorted[n - low], std::max(0.0, 1 - 2 * tail)};
}

Verdict compare_median(const MedianInterval& interval, double threshold) {
  if (interval.low >= threshold) return Verdict::kAbove;
  if (interval.high < threshold) return Verdict::kBelow;
  return Verdict::kUndecided;
}

const char* verdict_name(Verdict v, bool below_is_met) {
  switch (v) {
    case Verdict::kAbove:
      return below_is_met ? "not met" : "met";
    case Verdict::kBelow:
      return below_is_met ? "met" : "not met";
    case Verdict::kUndecided:
      return "undecided";
  }
  return "undecided";
}

}  // namespace tt::analysis
