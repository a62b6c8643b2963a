// Token sampling with llama.cpp's conventions: temperature <= 0 is greedy (argmax of the raw logits); otherwise
// repetition penalty, top-k, top-p, min-p and temperature, in llama.cpp's order, then a draw from the
// distribution with a seeded generator (same seed, same text).
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <vector>

namespace tt {

struct SamplingParams {
  float temperature = 0.8f;
  int32_t top_k = 40;           // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int32_t repeat_last_n = 64;
  uint32_t seed = 0xFFFFFFFF;  // as llama.cpp: the default means "random"; we fix it for reproducibility
  // Throws tt::Error naming the parameter when out of range.
  void validate() const;
};

// A candidate token: (logit, token id).
using Candidate = std::pair<float, int32_t>;

struct SampleResult {
  int32_t token = -1;
  float probability = 0.0f;  // of the chosen token under the final (truncated, tempered) distribution
};

class Sampler {
 public:
  explicit Sampler(SamplingParams params);
  SampleResult sample(std::span<const float> logits);
  // Tokens seen so far (prompt and generated), for the repetition penalty.
  void accept(int32_t token);
  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  std::mt19937 rng_;
  std::deque<int32_t> recent_;
  std::vector<Candidate> candidates_;
  std::vector<Candidate> penalised_;  // distinct recent tokens with their penalised logits, by id
};

// The candidates' order: larger logit first, then lower id (a strict total order on non-NaN logits, so the top k
// are the same whichever way they are found).
bool ranks_before(const Candidate& a, const Candidate& b);
// The best `keep` candidates in ranks_before order into `out`: every token at its logit, except those in
// `penalised` (distinct ids in increasing order), which take the value given there. A token at NaN or -inf (banned)
// is never a candidate.
void top_candidates(std::span<const float> logits, std::span<const Candidate> penalised, size_t keep,
                    std::vector<Candidate>& out);

// Index of the largest value (the first of equal ones).
int32_t argmax(std::span<const float> values);

}  // namespace tt
