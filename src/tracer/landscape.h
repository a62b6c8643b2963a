// The logit landscape of one step: the top-k tokens, the softmax normaliser and the entropy of the full softmax,
// and the logits' min, mean and standard deviation, computed in two linear passes over each part of the vocabulary
// (the tracer does this every step, so it must cost a small fraction of a generation step). Parts have a fixed size
// and merge in order: the result does not depend on which or how many threads computed them.
#pragma once

#include <algorithm>
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
  // The logits' plain statistics (steps.jsonl logits_stats), from the same pass. NaN logits rank below every number
  // (in `top` only when fewer than k logits are numbers); they make the sums (entropy, mean, std) NaN.
  float min_logit = 0;
  double mean_logit = 0, std_logit = 0;

  // Softmax probability of a logit of this step.
  double prob(float logit) const { return std::exp(static_cast<double>(logit - max_logit) - log_z); }
};

// One part of the vocabulary: its top-k and its sums relative to its own maximum.
struct LandscapePart {
  // Ids in the whole vocabulary of the k largest logits of the part and its seed (landscape_part), largest first.
  std::vector<int32_t> top;
  float ref = 0;                      // the distances' origin: the part's maximum (0 when every logit of it is -inf)
  double z = 0, s = 0, d = 0, q = 0;  // sums over the part of e_i, e_i d_i, d_i, d_i^2 with d_i = l_i - ref,
                                      // e_i = exp(d_i)
  float min = 0;
  size_t n = 0;  // logits in the part
};
constexpr size_t kLandscapePartLogits = 16384;
// A part's sums on the way (see landscape.cpp's distance_sums).
struct LandscapeSums {
  double z = 0, s = 0, d = 0, q = 0;
  float min = INFINITY;  // of the logits themselves (ref + min d_i would round)
};
// Pass 2 of a part (or of whole blocks of it, in order) from the part's maximum `origin`, added to out. kWidest: the
// AVX-512 loop where the CPU has it, else kPortable, the vector-extension loop (AVX2 with FMA or the baseline); their
// sums agree to a few float roundings (tests compare them).
enum class SumsPath { kWidest, kPortable };
void distance_sums(std::span<const float> logits, float origin, LandscapeSums& out, SumsPath path = SumsPath::kWidest);
inline size_t landscape_part_count(size_t n_logits) {
  return (n_logits + kLandscapePartLogits - 1) / kLandscapePartLogits;
}
// The logits of part `part`: [part * kLandscapePartLogits, ...), at most kLandscapePartLogits of them.
inline std::span<const float> landscape_part_logits(std::span<const float> logits, size_t part) {
  const size_t begin = std::min(logits.size(), part * kLandscapePartLogits);
  return logits.subspan(begin, std::min(kLandscapePartLogits, logits.size() - begin));
}
// Part `part` (landscape_part_logits) into out, whose vectors keep their capacity. The part's top-k list starts from
// `seed` (ids of earlier parts, e.g. the previous part's list): a seed's k-th logit skips most of the part's without
// a look, which a list starting empty must rank until it holds k (the merge takes each part's own ids).
void landscape_part(std::span<const float> logits, size_t part, int k, LandscapePart& out,
                    std::span<const int32_t> seed = {});
// The landscape from all the parts, in order (every part of logits, computed by landscape_part with the same k).
LogitLandscape merge_landscape(std::span<const float> logits, std::span<const LandscapePart> parts, int k);

// The chunk of logits whose float lanes distance_sums adds up before it adds them to its double sums.
constexpr size_t kLandscapeBlockLogits = 1024;
static_assert(kLandscapePartLogits % kLandscapeBlockLogits == 0);

// Every part on this thread, then their merge. k is clamped to [1, logits.size()]; logits must not be empty.
LogitLandscape logit_landscape(std::span<const float> logits, int k);

}  // namespace tt
