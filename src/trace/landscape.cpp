#include "trace/landscape.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/error.h"

namespace tt {
namespace {

// Four floats in one SSE register (GCC/Clang vector extension): the loops below must run vectorised at the
// baseline ISA, and the compiler does not vectorise float reductions on its own (that would reorder the sums).
typedef float Float4 __attribute__((vector_size(16)));
typedef int32_t Int4 __attribute__((vector_size(16)));
typedef float Float8 __attribute__((vector_size(32)));
typedef float Float16 __attribute__((vector_size(64)));
typedef int32_t Int16 __attribute__((vector_size(64)));

// The clones of the vocabulary-wide loops: AVX-512, AVX2 with FMA (x86-64-v3), and the baseline; chosen at load time.
#define TT_VOCAB_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

// exp(x) for x <= 0 to about 2 ulp, four at a time, without libm (a call per element would cost a millisecond a
// step on a 150k-token vocabulary). Range reduction x = n ln2 + r (Cody-Waite, two constants), |r| <= ln2/2,
// degree-6 polynomial, 2^n built from its exponent bits.
// In place, by reference: a 32-byte vector passed by value to a function of the baseline target is an ABI error
// for Clang (and a warning for GCC) even when the call is inlined.
template <typename Float, typename Int>
[[gnu::always_inline]] inline void exp_nonpositive(Float& x) {
  x = x < -87.0f ? Float{} - 87.0f : x;  // below: exp underflows; such a term's share of Z is < 1e-37
  // Round to nearest by adding and subtracting 1.5 * 2^23 (valid for |x log2 e| < 2^22).
  constexpr float kRound = 12582912.0f;
  const Float n = (x * 1.44269504088896341f + kRound) - kRound;
  const Float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  Float p = r * (1.0f / 720) + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const Int bits = (__builtin_convertvector(n, Int) + 127) << 23;
  Float two_n;  // memcpy, not std::bit_cast: no function returning a 32-byte vector by value
  std::memcpy(&two_n, &bits, sizeof(two_n));
  x = p * two_n;
}

// One pass over the distances d_i = l_i - m (l_i <= m) for the softmax and the plain moments together:
// Z = sum_i exp(d_i), S = sum_i exp(d_i) d_i, D = sum_i d_i, Q = sum_i d_i^2, and min_i l_i. Sixteen float lanes
// summed over chunks of 1024 logits (error < 1e-5 relative), chunks summed in double. The exponential is most of
// the cost: the polynomial's fused multiply-adds (x86-64-v3 and up) halve it, two independent vectors hide their
// latency, and the moments ride along on loads already made (a separate pass cost 4-7 us more a step on 32,000 logits).
struct DistanceSums {
  double z = 0, s = 0, d = 0, q = 0;
  float min = 0;  // of the logits themselves (m + min d_i would round)
};
TT_VOCAB_CLONES void distance_sums(const float* l, size_t n, float m, DistanceSums& out) {
  double z_sum = 0, s_sum = 0, d_sum = 0, q_sum = 0;  // locals: through the reference every add would be a store
  Float16 lo = Float16{} + INFINITY;
  float min_logit = INFINITY;
  constexpr size_t kChunk = 1024;
  for (size_t begin = 0; begin < n; begin += kChunk) {
    const size_t end = std::min(n, begin + kChunk);
    Float16 z16[2] = {}, s16[2] = {}, d16[2] = {}, q16[2] = {};
    size_t i = begin;
    for (; i + 32 <= end; i += 32)
      for (int h = 0; h < 2; ++h) {
        Float16 x;
        std::memcpy(&x, l + i + 16 * h, sizeof(x));
        lo = x < lo ? x : lo;
        const Float16 d = x - m;
        d16[h] += d;
        q16[h] += d * d;
        Float16 e = d;
        exp_nonpositive<Float16, Int16>(e);
        z16[h] += e;
        s16[h] += e * d;
      }
    for (; i < end; ++i) {  // tail, padded with -inf distances (e = 0)
      Float4 d = Float4{} - 1000.0f;
      d[0] = l[i] - m;
      Float4 e = d;
      exp_nonpositive<Float4, Int4>(e);
      z_sum += e[0];
      s_sum += static_cast<double>(e[0]) * d[0];
      d_sum += d[0];
      q_sum += static_cast<double>(d[0]) * d[0];
      min_logit = l[i] < min_logit ? l[i] : min_logit;
    }
    const Float16 z = z16[0] + z16[1], s = s16[0] + s16[1], d = d16[0] + d16[1], q = q16[0] + q16[1];
    for (int j = 0; j < 16; ++j) z_sum += z[j], s_sum += s[j], d_sum += d[j], q_sum += q[j];
  }
  for (int j = 0; j < 16; ++j) min_logit = lo[j] < min_logit ? lo[j] : min_logit;
  out = {z_sum, s_sum, d_sum, q_sum, min_logit};
}

constexpr size_t kCandidateBlock = 64;

// The first index >= i of a block of kCandidateBlock logits whose maximum is above threshold, or the start of the
// tail (fewer left): the top-k pass looks at logits one by one only there. (NaNs are skipped: never above the
// threshold, and consider() would not keep them either.) Lane-wise maxima, then halving: comparisons to a mask vector
// compile to lane-by-lane moves.
TT_VOCAB_CLONES size_t next_candidate_block(const float* l, size_t i, size_t n, float threshold) {
  for (; i + kCandidateBlock <= n; i += kCandidateBlock) {
    Float16 mx = Float16{} - INFINITY;  // not the first vector: a NaN lane would stay NaN and hide its successors
    for (size_t j = 0; j < kCandidateBlock; j += 16) {
      Float16 x;
      std::memcpy(&x, l + i + j, sizeof(x));
      mx = x > mx ? x : mx;
    }
    Float8 lo, hi;
    std::memcpy(&lo, &mx, sizeof(lo));
    std::memcpy(&hi, reinterpret_cast<const char*>(&mx) + sizeof(lo), sizeof(hi));
    lo = hi > lo ? hi : lo;
    Float4 a, b;
    std::memcpy(&a, &lo, sizeof(a));
    std::memcpy(&b, reinterpret_cast<const char*>(&lo) + sizeof(a), sizeof(b));
    a = b > a ? b : a;
    if (std::max(std::max(a[0], a[1]), std::max(a[2], a[3])) > threshold) return i;
  }
  return i;
}

}  // namespace

LogitLandscape logit_landscape(std::span<const float> logits, int k) {
  if (logits.empty()) fail("logit landscape of an empty vocabulary");
  const size_t n = logits.size();
  const size_t keep = std::clamp<size_t>(static_cast<size_t>(std::max(k, 1)), 1, n);
  LogitLandscape out;

  // Pass 1: top-k by insertion into a sorted list. Once it is full, a block of logits is looked at one by one
  // only when one of them beats the current k-th (rare after the first few thousand).
  out.top.reserve(keep + 1);
  float threshold = -INFINITY;  // the k-th largest so far; -inf until k logits are in
  auto consider = [&](size_t i) {
    const float l = logits[i];
    if (out.top.size() == keep && !(l > threshold)) return;  // ties keep the lower id
    auto pos = std::upper_bound(out.top.begin(), out.top.end(), l, [&](float v, int32_t id) { return v > logits[id]; });
    out.top.insert(pos, static_cast<int32_t>(i));
    if (out.top.size() > keep) out.top.pop_back();
    if (out.top.size() == keep) threshold = logits[out.top.back()];
  };
  size_t i = 0;
  while (i + kCandidateBlock <= n) {
    if (out.top.size() == keep) {
      i = next_candidate_block(logits.data(), i, n, threshold);
      if (i + kCandidateBlock > n) break;
    }
    for (size_t j = i; j < i + kCandidateBlock; ++j) consider(j);
    i += kCandidateBlock;
  }
  for (; i < n; ++i) consider(i);
  out.max_logit = logits[out.top[0]];

  // Pass 2: Z = sum e_i and S = sum e_i d_i with d_i = l_i - m, e_i = exp(d_i); then H = log Z - S / Z. The
  // logits' moments from those of the distances, the variance as Q / n - (D / n)^2 in double.
  DistanceSums sums;
  distance_sums(logits.data(), n, out.max_logit, sums);
  out.log_z = std::log(sums.z);
  out.entropy = std::max(0.0, out.log_z - sums.s / sums.z);
  const double mean_d = sums.d / static_cast<double>(n);
  out.min_logit = sums.min;
  out.mean_logit = out.max_logit + mean_d;
  out.std_logit = std::sqrt(std::max(0.0, sums.q / static_cast<double>(n) - mean_d * mean_d));
  return out;
}

}  // namespace tt
