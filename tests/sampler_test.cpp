// The sampler on hand-made logits: greedy is the first largest logit (with and without the repetition penalty,
// which take different paths), truncation to one candidate equals greedy, and a seed fixes the draws.
#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"

namespace tt {
namespace {

SamplingParams greedy_params(float repeat_penalty = 1.0f) {
  SamplingParams p;
  p.temperature = 0;
  p.repeat_penalty = repeat_penalty;
  return p;
}

TEST(Sampler, GreedyTakesTheFirstLargestLogit) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 2.5f};
  Sampler s(greedy_params());
  EXPECT_EQ(s.sample(logits).token, 1);
  EXPECT_EQ(s.sample(logits).probability, 1.0f);
  EXPECT_EQ(s.sample(std::vector<float>{-5.0f}).token, 0);
  EXPECT_EQ(s.sample(std::vector<float>{-1.0f, -1.0f}).token, 0);
}

// argmax runs sixteen lanes at a time with a scalar tail; std::max_element (operator<) is the oracle: the first of
// equal largest values, a NaN never chosen unless it comes first, all -inf gives 0.
TEST(Sampler, ArgmaxMatchesMaxElementOnEveryShape) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3);  // few distinct values: many ties across lanes and the tail
  std::uniform_real_distribution<float> wide(-20.0f, 20.0f);
  const float specials[] = {NAN, -INFINITY, INFINITY, -0.0f, 0.0f};
  int checked = 0;
  for (size_t n : {1, 2, 15, 16, 17, 31, 32, 33, 47, 100, 1000, 50257}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> v(n);
      for (float& x : v) x = trial % 2 ? static_cast<float>(small(rng)) : wide(rng);
      if (trial % 4 >= 2)  // sprinkle NaN, infinities and signed zeros, sometimes at the front
        for (int s = 0; s < 3; ++s) v[rng() % n] = specials[rng() % 5];
      if (trial == 5) v[0] = NAN;
      if (trial == 7) std::fill(v.begin(), v.end(), -INFINITY);
      if (trial == 9) std::fill(v.begin(), v.end(), NAN);
      if (trial == 11) std::fill(v.begin(), v.end(), -INFINITY), v[n - 1] = -1.0f;
      const auto expected = static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
      ASSERT_EQ(argmax(v), expected) << "n " << n << ", trial " << trial;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 12 * 40);
}

TEST(Sampler, GreedyWithRepetitionPenalty) {
  // Token 1 (3.0) was seen: divided by 2 it falls to 1.5, so the other 3.0 (token 3) wins; a seen negative logit
  // is multiplied, never raised.
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 2.5f};
  Sampler s(greedy_params(2.0f));
  s.accept(1);
  EXPECT_EQ(s.sample(logits).token, 3);
  s.accept(3);
  s.accept(4);
  EXPECT_EQ(s.sample(logits).token, 1) << "tokens 1 and 3 both at 1.5 (4 at 1.25): the first of equal ones";
  Sampler t(greedy_params(2.0f));
  t.accept(0);
  EXPECT_EQ(t.sample(std::vector<float>{-0.5f, -0.9f}).token, 1) << "-0.5 * 2 = -1.0 < -0.9";
}

TEST(Sampler, TopKOfOneIsGreedyAndSeedsRepeat) {
  const std::vector<float> logits = {0.3f, 2.0f, 1.9f, -1.0f, 1.95f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 1;
  Sampler one(p);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(one.sample(logits).token, 1);

  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 42;
  Sampler a(p), b(p);
  std::vector<int32_t> da, db;
  for (int i = 0; i < 50; ++i) da.push_back(a.sample(logits).token), db.push_back(b.sample(logits).token);
  EXPECT_EQ(da, db);
  EXPECT_GT(std::count(da.begin(), da.end(), 1) + std::count(da.begin(), da.end(), 2), 0);
  EXPECT_NE(std::count(da.begin(), da.end(), da[0]), 50) << "temperature 1 over close logits draws more than one";
}

// The threshold pass finds what sorting every candidate finds: the same tokens in the same order, over vocabularies
// with many ties, NaN and infinities (NaN and -inf are never candidates), penalised tokens pushed out of or (a penalty
// below 1) into the top, and every k from 1 to all of them.
TEST(Sampler, TopCandidatesEqualSortingTheWholeVocabulary) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> small(-4, 4);
  std::uniform_real_distribution<float> wide(-30.0f, 30.0f);
  int checked = 0;
  for (size_t n : {1, 5, 16, 17, 100, 1000, 32000}) {
    for (int trial = 0; trial < 12; ++trial) {
      std::vector<float> logits(n);
      for (float& x : logits) x = trial % 2 ? static_cast<float>(small(rng)) : wide(rng);
      if (trial % 3 == 2) {
        logits[rng() % n] = NAN;
        logits[rng() % n] = INFINITY;
        logits[rng() % n] = -INFINITY;
      }
      if (trial == 4) std::sort(logits.begin(), logits.end());  // ascending: the threshold rises at every logit
      std::vector<Candidate> penalised;
      for (int p = 0; p < static_cast<int>(std::min<size_t>(n, 6)); ++p) {
        const auto id = static_cast<int32_t>(rng() % n);
        if (std::any_of(penalised.begin(), penalised.end(), [&](const Candidate& c) { return c.second == id; }))
          continue;
        const float penalty = p % 2 ? 1.5f : 0.5f, l = logits[id];
        penalised.push_back({l > 0 ? l / penalty : l * penalty, id});
      }
      std::sort(penalised.begin(), penalised.end(), [](auto& a, auto& b) { return a.second < b.second; });
      std::vector<Candidate> all;
      for (size_t i = 0; i < n; ++i) {
        float v = logits[i];
        for (const Candidate& c : penalised)
          if (c.second == static_cast<int32_t>(i)) v = c.first;
        if (v > -INFINITY) all.push_back({v, static_cast<int32_t>(i)});  // not NaN or -inf
      }
      std::sort(all.begin(), all.end(), ranks_before);
      for (size_t keep : {size_t{1}, size_t{2}, size_t{40}, n / 2 + 1, n, n + 3}) {
        std::vector<Candidate> top;
        top_candidates(logits, penalised, keep, top);
        std::vector<Candidate> expected(all.begin(), all.begin() + static_cast<ptrdiff_t>(std::min(keep, all.size())));
        ASSERT_EQ(top.size(), expected.size()) << "n " << n << " trial " << trial << " keep " << keep;
        for (size_t i = 0; i < top.size(); ++i) {
          ASSERT_EQ(top[i].second, expected[i].second) << "n " << n << " trial " << trial << " keep " << keep;
          ASSERT_EQ(std::memcmp(&top[i].first, &expected[i].first, sizeof(float)), 0);
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 7 * 12 * 6);
}

// As llama.cpp's penalties sampler: a token seen several times in the window is penalised once.
TEST(Sampler, RepetitionPenaltyIsOncePerToken) {
  const std::vector<float> logits = {4.0f, 2.1f};
  Sampler s(greedy_params(2.0f));
  for (int i = 0; i < 3; ++i) s.accept(0);
  EXPECT_EQ(s.sample(logits).token, 1) << "4 / 2 = 2 < 2.1";
  Sampler t(greedy_params(2.0f));
  for (int i = 0; i < 3; ++i) t.accept(0);
  EXPECT_EQ(t.sample(std::vector<float>{4.0f, 1.9f}).token, 0) << "4 / 2 = 2 > 1.9: not 4 / 8 = 0.5";
}

// Every logit NaN or -inf, or none at all: an error naming it, not an arbitrary token.
TEST(Sampler, NothingToSampleFromIsAnError) {
  SamplingParams p;
  Sampler s(p);
  EXPECT_THROW(s.sample(std::vector<float>{NAN, NAN}), Error);
  EXPECT_THROW(s.sample(std::vector<float>{-INFINITY, NAN, -INFINITY}), Error);
  EXPECT_EQ(s.sample(std::vector<float>{-INFINITY, 1.0f, NAN}).token, 1);
  EXPECT_THROW(s.sample(std::vector<float>{}), Error);
}

}  // namespace
}  // namespace tt
