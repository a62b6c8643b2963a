// The logit landscape of one step: the top-k tokens, the softmax normaliser and the entropy of the full softmax,
// and the logits' min, mean and standard deviation, computed in two linear passes over the vocabulary (the tracer does
// this every step, on the run's thread while the workers wait, so it must cost a small fraction of a generation step).
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

namespace tt {

struct LogitLandscape {
  std::vector<int32_t> top;  // ids of the k largest logits, largest first; equal logits: lower id first
  float max_logit = 0;
  double log_z = 0;    // log sum_i exp(l_i - max_logit)
  double entropy = 0;  // -sum_i p_i log p_i of the full softmax, in nats
  // The logits' plain statistics (steps.jsonl logits_stats), from the same pass. NaN logits are not ranked; they
  // make the sums (entropy, mean, std) NaN.
  float min_logit = 0;
  double mean_logit = 0, std_logit = 0;

  // Softmax probability of a logit of this step.
  double prob(float logit) const { return std::exp(static_cast<double>(logit - max_logit) - log_z); }
};

// k is clamped to [1, logits.size()]; logits must not be empty.
LogitLandscape logit_landscape(std::span<const float> logits, int k);

}  // namespace tt
