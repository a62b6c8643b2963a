#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/vocab_clones.h"
#include "core/vocab_scan.h"

namespace tt {
namespace {

// The first index of the largest logit, as std::max_element with operator< finds it, sixteen lanes at a time
// (std::max_element's compare-and-move chain took ~45 us a step on a 50,257-token vocabulary). Each lane keeps
// its largest value and the first index holding it (a strict > keeps the earlier index and skips NaN); the lanes
// are then reduced to the largest value at the lowest index. Returns -1 when no lane saw a value above -inf (all
// -inf or NaN): the caller's scalar scan decides those.
TT_VOCAB_CLONES int64_t argmax_lanes(const float* v, size_t n) {
  typedef float Float16 __attribute__((vector_size(64)));
  typedef int32_t Int16 __attribute__((vector_size(64)));
  Float16 best = Float16{} - INFINITY;
  Int16 at = Int16{} - 1, index = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  size_t i = 0;
  for (; i + 16 <= n; i += 16, index += 16) {
    Float16 x;
    std::memcpy(&x, v + i, sizeof(x));
    const Int16 above = x > best;
    best = above ? x : best;
    at = above ? index : at;
  }
  float top = -INFINITY;
  int64_t top_at = -1;
  for (int lane = 0; lane < 16; ++lane)
    if (at[lane] >= 0 && (best[lane] > top || (best[lane] == top && at[lane] < top_at)))
      top = best[lane], top_at = at[lane];
  for (; i < n; ++i)  // the tail comes after every index seen above: only a larger value replaces
    if (v[i] > top) top = v[i], top_at = static_cast<int64_t>(i);
  return top_at;
}

}  // namespace

void SamplingParams::validate() const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) fail("--temp must be >= 0, got {}", temperature);
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("--top-p must be in (0, 1], got {}", top_p);
  if (!(min_p >= 0.0f && min_p < 1.0f)) fail("--min-p must be in [0, 1), got {}", min_p);
  if (!(repeat_penalty > 0.0f) || !std::isfinite(repeat_penalty))
    fail("--repeat-penalty must be > 0, got {}", repeat_penalty);
  if (repeat_last_n < 0) fail("--repeat-last-n must be >= 0, got {}", repeat_last_n);
}

int32_t argmax(std::span<const float> v) {
  // A NaN first is never replaced (nothing compares above it); no finite or +inf value at all: the first -inf.
  const int64_t at = v.empty() || std::isnan(v[0]) ? -1 : argmax_lanes(v.data(), v.size());
  if (at >= 0) return static_cast<int32_t>(at);
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

Sampler::Sampler(SamplingParams params) : params_(params), rng_(params.seed) { params_.validate(); }

void Sampler::accept(int32_t token) {
  if (params_.repeat_last_n == 0) return;
  recent_.push_back(token);
  while (static_cast<int32_t>(recent_.size()) > params_.repeat_last_n) recent_.pop_front();
}

bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// One pass that looks at a logit only where it reaches the running threshold (the k-th best so far), instead of
// copying and sorting the whole vocabulary (docs/performance.md "Sampling").
void top_candidates(std::span<const float> logits, std::span<const Candidate> penalised, size_t keep,
                    std::vector<Candidate>& out) {
  TT_CHECK(std::adjacent_find(penalised.begin(), penalised.end(),
                              [](const Candidate& a, const Candidate& b) { return a.second >= b.second; }) ==
               penalised.end(),
           "penalised tokens not in increasing order");
  out.clear();
  for (const Candidate& c : penalised)
    if (c.first > -INFINITY) out.push_back(c);  // not NaN or -inf
  // `out` shrinks to the best `keep` once it holds twice as many: what ranks below the k-th best so far never
  // comes back, so the scan then looks only at logits at least as large as it.
  float at_least = -INFINITY;
  const size_t batch = std::max<size_t>(2 * keep, 64);
  auto shrink = [&] {
    std::nth_element(out.begin(), out.begin() + static_cast<ptrdiff_t>(keep - 1), out.end(), ranks_before);
    out.resize(keep);
    at_least = out.back().first;
  };
  if (keep > 0 && out.size() >= keep) shrink();
  auto is_penalised = [&](int32_t id) {
    return std::binary_search(penalised.begin(), penalised.end(), Candidate{0.0f, id},
                              [](const Candidate& a, const Candidate& b) { return a.second < b.second; });
  };
  const size_t n = logits.size();
  // Above the value just below at_least: at least at_least (above -inf while nothing is kept: every number).
  auto next = [&](size_t i) { return next_above(logits.data(), i, n, std::nextafter(at_least, -INFINITY)).index; };
  for (size_t i = next(0); i < n; i = next(i + 1)) {
    const int32_t id = static_cast<int32_t>(i);
    if (is_penalised(id)) continue;
    out.push_back({logits[i], id});
    if (out.size() >= batch) shrink();
  }
  const size_t k = std::min(keep, out.size());
  std::partial_sort(out.begin(), out.begin() + static_cast<ptrdiff_t>(k), out.end(), ranks_before);
  out.resize(k);
}

SampleResult Sampler::sample(std::span<const float> logits) {
  const int32_t n = static_cast<int32_t>(logits.size());
  if (n == 0) fail("no logits to sample from");
  if (params_.temperature <= 0.0f && params_.repeat_penalty == 1.0f) {
    // Greedy without a penalty: the first largest logit, read in place (copying the vocabulary into candidates
    // first took 30 us a step on a 32,000-token vocabulary).
    return {argmax(logits), 1.0f};
  }
  // Repetition penalty on the tokens seen recently, once per token however often it was seen (llama.cpp's
  // penalties sampler: divide positive logits, multiply negative ones).
  penalised_.clear();
  if (params_.repeat_penalty != 1.0f)
    for (int32_t t : recent_)
      if (t >= 0 && t < n) {
        const float l = logits[t];
        penalised_.push_back({l > 0 ? l / params_.repeat_penalty : l * params_.repeat_penalty, t});
      }
  auto by_id = [](const Candidate& a, const Candidate& b) { return a.second < b.second; };
  std::sort(penalised_.begin(), penalised_.end(), by_id);
  penalised_.erase(std::unique(penalised_.begin(), penalised_.end(),
                               [](const Candidate& a, const Candidate& b) { return a.second == b.second; }),
                   penalised_.end());
  // Greedy with a penalty is a top-1; otherwise top-k (all of them when off).
  size_t keep = static_cast<size_t>(n);
  if (params_.temperature <= 0.0f)
    keep = 1;
  else if (params_.top_k > 0 && params_.top_k < n)
    keep = static_cast<size_t>(params_.top_k);
  top_candidates(logits, penalised_, keep, candidates_);
  if (candidates_.empty()) fail("no logit to sample from: all {} are NaN or -inf", n);
  if (params_.temperature <= 0.0f) return {candidates_.front().second, 1.0f};
  // Softmax over the kept candidates (before temperature, as llama.cpp's top-p/min-p do).
  auto softmax = [&](float temp, std::vector<float>& p) {
    p.resize(candidates_.size());
    const float max_l = candidates_.front().first;
    double sum = 0;
    for (size_t i = 0; i < candidates_.size(); ++i) sum += p[i] = std::exp((candidates_[i].first - max_l) / temp);
    for (float& x : p) x = static_cast<float>(x / sum);
  };
  std::vector<float> probs;
  // Top-p: the smallest prefix whose probability reaches top_p.
  if (params_.top_p < 1.0f) {
    softmax(1.0f, probs);
    double cum = 0;
    size_t k = 0;
    while (k < probs.size()) {
      cum += probs[k++];
      if (cum >= params_.top_p) break;
    }
    candidates_.resize(std::max<size_t>(k, 1));
  }
  // Min-p: drop candidates below min_p times the best one's probability.
  if (params_.min_p > 0.0f) {
    const float threshold = candidates_.front().first + std::log(params_.min_p);
    size_t k = 1;
    while (k < candidates_.size() && candidates_[k].first >= threshold) ++k;
    candidates_.resize(k);
  }
  softmax(params_.temperature, probs);
  std::discrete_distribution<size_t> dist(probs.begin(), probs.end());
  size_t pick = dist(rng_);
  return {candidates_[pick].second, probs[pick]};
}

}  // namespace tt
