// A scan over a vocabulary's logits for the next one above a threshold: what a top-k over 32,000-150,000 logits
// spends its time on once its list is full (the tracer's logit landscape, the sampler's top-k).
#pragma once

#include <cstddef>

namespace tt {

struct VocabHit {
  size_t index;      // the first index in [i, n) whose value is above the threshold; n: none
  float passed_max;  // the largest value passed over before it; -inf when none (NaNs are passed over, never kept)
};

// Whole blocks of 64 (from multiples of 64) by their lane-wise maxima, then one by one inside the block that holds a
// value above the threshold; the values before the first block and the tail one by one.
VocabHit next_above(const float* v, size_t i, size_t n, float threshold);

}  // namespace tt
