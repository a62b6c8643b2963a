// Summaries of a sample of measurements (a benchmark's repetitions): mean, standard deviation, median, and a
// distribution-free confidence interval for the median. Benchmarks on a shared VM vary by more than the effects they
// measure (docs/performance.md), so a figure is only read as above or below a target when its interval is.
#pragma once

#include <cstddef>
#include <span>

namespace tt::analysis {

struct SampleSummary {
  size_t n = 0;
  double mean = 0, std = 0, median = 0;  // std: the sample standard deviation (n - 1); 0 for fewer than 2 values
};
SampleSummary summarize(std::span<const double> values);  // all zero for an empty sample

// The interval between two order statistics of the sample that holds the population's median with probability at
// least `confidence` whatever the distribution (sign test): [x_(k), x_(n+1-k)] for the largest k with
// P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2. `coverage` is that interval's exact probability; samples too
// small for the confidence asked (n < 6 at 95%) get the whole range and its smaller coverage, 1 - 2^(1-n).
struct MedianInterval {
  double low = 0, high = 0;
  double coverage = 0;  // 0 for an empty sample
};
MedianInterval median_interval(std::span<const double> values, double confidence = 0.95);

// Where a sample's median stands against a threshold: above it (the whole interval at or above), below it (the
// whole interval below), or undecided (the interval straddles it: more repetitions, or a quieter machine).
enum class Verdict { kAbove, kBelow, kUndecided };
Verdict compare_median(const MedianInterval& interval, double threshold);
// "met", "not met" or "undecided" for a target the median must be above (or, with below_is_met, below).
const char* verdict_name(Verdict v, bool below_is_met = false);

}  // namespace tt::analysis
