// The tracer's logit landscape against a direct double-precision computation.
#include "tracer/landscape.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <random>

#include "trace/hash.h"
#include "tracer/tracer.h"

namespace tt {
namespace {

struct Direct {
  std::vector<int32_t> order;
  double entropy = 0;
  std::vector<double> p;
  double min = 0, mean = 0, std = 0;
};

Direct direct(const std::vector<float>& logits) {
  Direct d;
  d.order.resize(logits.size());
  std::iota(d.order.begin(), d.order.end(), 0);
  std::stable_sort(d.order.begin(), d.order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const double m = logits[d.order[0]];
  double z = 0;
  for (float l : logits) z += std::exp(l - m);
  for (float l : logits) {
    const double p = std::exp(l - m) / z;
    d.p.push_back(p);
    if (p > 0) d.entropy -= p * std::log(p);
  }
  d.min = *std::min_element(logits.begin(), logits.end());
  for (float l : logits) d.mean += l;
  d.mean /= static_cast<double>(logits.size());
  for (float l : logits) d.std += (l - d.mean) * (l - d.mean);
  d.std = std::sqrt(d.std / static_cast<double>(logits.size()));
  return d;
}

TEST(LogitLandscape, MatchesDirectComputationOnAVocabulary) {
  std::mt19937 rng(7);
  for (float spread : {0.01f, 1.0f, 8.0f, 60.0f}) {
    std::normal_distribution<float> dist(0.0f, spread);
    std::vector<float> logits(32000);
    for (float& l : logits) l = dist(rng);
    const Direct want = direct(logits);
    const LogitLandscape got = logit_landscape(logits, 10);
    ASSERT_EQ(got.top.size(), 10u);
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(got.top[i], want.order[i]) << "rank " << i << " spread " << spread;
      EXPECT_NEAR(got.prob(logits[got.top[i]]), want.p[got.top[i]], 1e-6 * want.p[got.top[i]] + 1e-12);
    }
    EXPECT_NEAR(got.entropy, want.entropy, 1e-5 * std::max(1.0, want.entropy)) << "spread " << spread;
    EXPECT_EQ(got.min_logit, want.min) << "spread " << spread;
    EXPECT_NEAR(got.mean_logit, want.mean, 1e-6 * spread) << "spread " << spread;
    EXPECT_NEAR(got.std_logit, want.std, 1e-6 * want.std) << "spread " << spread;
  }
}

// The moments for lengths that exercise the vector body, the chunk boundary and the scalar tail, with a mean far
// from zero (the variance is computed from distances to the maximum).
TEST(LogitLandscape, MomentsAtEveryLength) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(25.0f, 3.0f);
  for (size_t n : {1u, 2u, 31u, 32u, 33u, 1023u, 1024u, 1057u, 151936u}) {
    std::vector<float> logits(n);
    for (float& l : logits) l = dist(rng);
    const Direct want = direct(logits);
    const LogitLandscape got = logit_landscape(logits, 5);
    EXPECT_EQ(got.min_logit, want.min) << n;
    EXPECT_NEAR(got.mean_logit, want.mean, 1e-6 * std::abs(want.mean)) << n;
    EXPECT_NEAR(got.std_logit, want.std, 1e-5 * want.std + 1e-9) << n;
  }
}

TEST(LogitLandscape, TiesKeepTheLowerIdAndKIsClamped) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};
  LogitLandscape got = logit_landscape(logits, 3);
  EXPECT_EQ(got.top, (std::vector<int32_t>{1, 3, 2}));
  got = logit_landscape(logits, 50);
  EXPECT_EQ(got.top, (std::vector<int32_t>{1, 3, 2, 0, 4}));
  got = logit_landscape(logits, 0);
  EXPECT_EQ(got.top, (std::vector<int32_t>{1}));
}

// The top-k pass skips blocks by their lane maxima: a NaN must not hide a larger logit behind it in its lane.
TEST(LogitLandscape, NaNDoesNotHideALaterLogitInItsBlock) {
  std::vector<float> logits(4096);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = -static_cast<float>(i % 97) / 97.0f;
  for (size_t nan_at : {1000u, 1024u, 4032u}) {
    std::vector<float> l = logits;
    l[nan_at] = NAN;
    l[nan_at + 16] = 100.0f;  // same lane, same 64-logit block, after the NaN
    l[nan_at + 33] = 50.0f;   // another lane
    const LogitLandscape got = logit_landscape(l, 3);
    ASSERT_GE(got.top.size(), 2u);
    EXPECT_EQ(got.top[0], static_cast<int32_t>(nan_at + 16)) << "NaN at " << nan_at;
    EXPECT_EQ(got.top[1], static_cast<int32_t>(nan_at + 33)) << "NaN at " << nan_at;
  }
}

// A NaN among the first k logits enters the list before it is full; it must not become a threshold nothing beats.
TEST(LogitLandscape, NaNBeforeTheListIsFullIsPushedOut) {
  std::vector<float> logits(40000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 1000) / 100.0f;
  logits[0] = NAN;
  logits[30000] = 50.0f;  // in the second part: after the list went from one part to the next
  const LogitLandscape got = logit_landscape(logits, 3);
  ASSERT_EQ(got.top.size(), 3u);
  EXPECT_EQ(got.top[0], 30000);
  EXPECT_EQ(got.top[1], 999);  // the first 9.99
  EXPECT_EQ(got.top[2], 1999);
  std::vector<float> all_nan(100, NAN);
  all_nan[50] = -INFINITY;
  EXPECT_EQ(logit_landscape(all_nan, 2).top, (std::vector<int32_t>{50, 0}));
}

// The tracer computes the parts on whichever worker is free: any order, any thread, reused part objects must merge
// to the very landscape of the single pass, bit for bit.
TEST(LogitLandscape, PartsComputedInAnyOrderMergeToTheSameLandscape) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(-3.0f, 6.0f);
  std::vector<float> logits(151936);
  for (float& l : logits) l = dist(rng);
  logits[150000] = 40.0f;  // the maximum in the last part, tied with one in the first
  logits[70] = 40.0f;
  const LogitLandscape want = logit_landscape(logits, 10);
  std::vector<LandscapePart> parts(landscape_part_count(logits.size()));
  ASSERT_EQ(parts.size(), 10u);
  for (LandscapePart& p : parts) p.top.assign(50, 12345), p.z = 99;  // stale contents of a previous step
  for (size_t p = parts.size(); p-- > 0;) landscape_part(logits, p, 10, parts[p]);
  const LogitLandscape got = merge_landscape(logits, parts, 10);
  EXPECT_EQ(got.top, want.top);
  EXPECT_EQ(got.top[0], 70);
  EXPECT_EQ(got.top[1], 150000);
  EXPECT_EQ(got.log_z, want.log_z);
  EXPECT_EQ(got.entropy, want.entropy);
  EXPECT_EQ(got.mean_logit, want.mean_logit);
  EXPECT_EQ(got.std_logit, want.std_logit);
  EXPECT_EQ(got.min_logit, want.min_logit);
  const Direct direct_want = direct(logits);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(got.top[i], direct_want.order[i]) << "rank " << i;
  EXPECT_NEAR(got.entropy, direct_want.entropy, 1e-5 * std::max(1.0, direct_want.entropy));
  EXPECT_NEAR(got.std_logit, direct_want.std, 1e-5 * direct_want.std);
  EXPECT_THROW(landscape_part(logits, parts.size(), 10, parts[0]), std::exception);
  EXPECT_THROW(merge_landscape(logits, std::span<const LandscapePart>(parts).first(9), 10), std::exception);
}

// A part whose logits are all -inf (masked tokens) adds nothing to the softmax and does not make it NaN.
// (Also when every finite logit is far below 0, where the masked part's distances are measured from.)
TEST(LogitLandscape, APartOfMinusInfinityAddsNothing) {
  for (float mean : {0.0f, -200.0f}) {
    std::vector<float> logits(40000, -INFINITY);
    std::mt19937 rng(5);
    std::normal_distribution<float> dist(mean, 2.0f);
    for (size_t i = 0; i < kLandscapePartLogits; ++i) logits[i] = dist(rng);
    for (size_t i = 2 * kLandscapePartLogits; i < logits.size(); ++i) logits[i] = dist(rng);
    const Direct want = direct(logits);
    const LogitLandscape got = logit_landscape(logits, 5);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(got.top[i], want.order[i]) << "rank " << i << " mean " << mean;
    EXPECT_NEAR(got.entropy, want.entropy, 1e-5 * want.entropy) << "mean " << mean;
    EXPECT_NEAR(got.prob(logits[got.top[0]]), want.p[got.top[0]], 1e-6 * want.p[got.top[0]]) << "mean " << mean;
    EXPECT_EQ(got.min_logit, -INFINITY);
  }
}

TEST(LogitLandscape, UniformAndCertainDistributions) {
  const std::vector<float> uniform(1000, 0.25f);
  EXPECT_NEAR(logit_landscape(uniform, 5).entropy, std::log(1000.0), 1e-6);
  EXPECT_NEAR(logit_landscape(uniform, 5).prob(0.25f), 1e-3, 1e-9);
  std::vector<float> certain(1000, -1e4f);
  certain[417] = 50.0f;
  const LogitLandscape c = logit_landscape(certain, 1);
  EXPECT_EQ(c.top[0], 417);
  EXPECT_NEAR(c.entropy, 0.0, 1e-12);
  EXPECT_NEAR(c.prob(50.0f), 1.0, 1e-12);
  const std::vector<float> one = {3.5f};
  EXPECT_EQ(logit_landscape(one, 10).top, (std::vector<int32_t>{0}));
  EXPECT_THROW(logit_landscape(std::vector<float>{}, 1), std::exception);
}

}  // namespace
// The per-step readout statistics (steps.jsonl hidden_stats / logits_stats) against a plain double loop, for
// lengths that exercise the vector body and the scalar tail.
// Pass 2's two loops (AVX-512 where the CPU has it, the portable vector loop everywhere) against double precision:
// each term exp(d) to 2e-7 relative where terms matter (d >= -20, the rest are below 2e-9 of the largest), 4e-7 down
// to the clamp at -87 (ln2's rounding times n), one logit at a time (the masked tail and the scalar tail); on
// vectors of every tail length with -inf and NaN in them the two loops' sums agree to float roundings, with the
// same minimum and the same NaNs.
TEST(LogitLandscape, DistanceSumsOfBothLoopsMatchDoublePrecision) {
  for (SumsPath path : {SumsPath::kWidest, SumsPath::kPortable}) {
    const char* name = path == SumsPath::kWidest ? "widest" : "portable";
    double worst[2] = {0, 0}, worst_d[2] = {0, 0};  // [d >= -20, d < -20]
    for (double d = -87.0; d <= 0.0; d += 0.0137) {
      const float logit = static_cast<float>(d);
      LandscapeSums sums;
      distance_sums(std::span<const float>(&logit, 1), 0.0f, sums, path);
      const double want = std::exp(static_cast<double>(logit)), error = std::abs(sums.z - want) / want;
      const int far = d < -20;
      if (error > worst[far]) worst[far] = error, worst_d[far] = d;
      EXPECT_NEAR(sums.s, want * logit, 4e-7 * want * std::abs(logit)) << name << " d " << d;
    }
    EXPECT_LT(worst[0], 2e-7) << name << " at " << worst_d[0];
    EXPECT_LT(worst[1], 4e-7) << name << " at " << worst_d[1];
    LandscapeSums zero;
    const float at_max = 3.5f;
    distance_sums(std::span<const float>(&at_max, 1), 3.5f, zero, path);
    EXPECT_EQ(zero.z, 1.0) << name << ": exp(0) is exactly 1";
  }
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 6.0f);
  for (size_t n : {1, 15, 16, 17, 31, 32, 33, 1000, 1024, 1025, 2047}) {
    std::vector<float> logits(n);
    for (float& l : logits) l = dist(rng);
    if (n > 20) logits[n / 2] = -INFINITY, logits[n / 3] = -200.0f;
    const float m = *std::max_element(logits.begin(), logits.end());
    LandscapeSums a, b;
    distance_sums(logits, m, a, SumsPath::kWidest);
    distance_sums(logits, m, b, SumsPath::kPortable);
    EXPECT_NEAR(a.z, b.z, 1e-6 * b.z) << n;
    EXPECT_NEAR(a.s, b.s, 1e-6 * std::abs(b.s) + 1e-30) << n;
    if (n <= 20) {  // no -inf: the plain sums are finite
      EXPECT_NEAR(a.d, b.d, 1e-6 * std::abs(b.d)) << n;
      EXPECT_NEAR(a.q, b.q, 1e-6 * b.q) << n;
    } else {
      EXPECT_TRUE(std::isinf(a.d) && std::isinf(b.d)) << n;
    }
    EXPECT_EQ(a.min, b.min) << n;
    logits[n - 1] = NAN;
    LandscapeSums x, y;
    distance_sums(logits, m, x, SumsPath::kWidest);
    distance_sums(logits, m, y, SumsPath::kPortable);
    EXPECT_TRUE(std::isnan(x.z) && std::isnan(y.z) && std::isnan(x.s) && std::isnan(y.s)) << n;
    EXPECT_EQ(x.min, y.min) << n << ": NaN is not a minimum";
  }
}

TEST(ReadoutStats, MatchesDirectComputation) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.5f, 3.0f);
  for (size_t n : {1u, 7u, 16u, 17u, 512u, 32003u}) {
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    double sum = 0, sum2 = 0;
    for (float x : v) sum += x, sum2 += static_cast<double>(x) * x;
    const double mean = sum / n;
    const ReadoutStats r = readout_stats(v);
    EXPECT_EQ(r.min, *std::min_element(v.begin(), v.end())) << n;
    EXPECT_EQ(r.max, *std::max_element(v.begin(), v.end())) << n;
    EXPECT_NEAR(r.mean, mean, 1e-12 * n) << n;
    EXPECT_NEAR(r.std, std::sqrt(std::max(0.0, sum2 / n - mean * mean)), 1e-9) << n;
    EXPECT_EQ(r.hash, XXH3_64bits(v.data(), n * sizeof(float))) << n;
  }
}

// The vector-dispatched XXH3 gives the library's value for inputs of every length class (short, mid-size, one
// stripe, many blocks, unaligned starts).
TEST(Xxh3, MatchesTheLibrary) {
  std::vector<uint8_t> bytes(300007);
  std::mt19937 rng(5);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  for (size_t n : {0u, 1u, 16u, 17u, 128u, 129u, 240u, 241u, 1024u, 1025u, 128000u, 300000u})
    for (size_t start : {0u, 3u})
      EXPECT_EQ(xxh3_64(bytes.data() + start, n), XXH3_64bits(bytes.data() + start, n)) << n << " from " << start;
}

// Hashing in pieces gives the one-shot value whatever the pieces' sizes (inside a stripe, across the internal
// buffer, the tracer's landscape parts of 32 KiB), and reset() starts over.
TEST(Xxh3, StreamInPiecesMatchesOneShot) {
  std::vector<uint8_t> bytes(201028);  // synth-qwen2-256's 50,257 logits
  std::mt19937 rng(6);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  Xxh3Stream stream;
  for (size_t piece : {1u, 7u, 64u, 255u, 256u, 1000u, 32768u, 65536u, 201028u}) {
    stream.reset();
    for (size_t at = 0; at < bytes.size(); at += piece)
      stream.update(bytes.data() + at, std::min(piece, bytes.size() - at));
    EXPECT_EQ(stream.digest(), XXH3_64bits(bytes.data(), bytes.size())) << "pieces of " << piece;
  }
  stream.reset();
  EXPECT_EQ(stream.digest(), XXH3_64bits(nullptr, 0));
}

}  // namespace tt
