#include "tracer/landscape.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/error.h"
#include "core/vocab_clones.h"
#include "core/vocab_scan.h"

#if defined(__x86_64__)
#include <immintrin.h>
// GCC 12 reports the AVX-512 intrinsics' internal _mm512_undefined_ps() operands as (maybe) uninitialised (a false
// positive of the header, as in hash.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace tt {
namespace {

// Four floats in one SSE register (GCC/Clang vector extension): the loops below must run vectorised at the
// baseline ISA, and the compiler does not vectorise float reductions on its own (that would reorder the sums).
typedef float Float4 __attribute__((vector_size(16)));
typedef int32_t Int4 __attribute__((vector_size(16)));
typedef float Float8 __attribute__((vector_size(32)));
typedef int32_t Int8 __attribute__((vector_size(32)));

// exp(x) for -87 <= x <= 0, a vector at a time, without libm (a call per element would cost a millisecond a step on
// a 150k-token vocabulary): x = n ln2 + r, |r| <= ln2/2, and exp(r) = 1 + r p(r) with p of degree 4 fitted to exp's
// relative error on that interval (1e-7 with one multiply-add fewer than a Taylor polynomial; the constant term 1
// makes exp(0) exactly 1). One constant for ln2: its rounding (2e-9) times n adds up to
// 2.4e-7 at x = -87 but under 6e-8 for x >= -20, where the terms that matter are (tests: below 2e-7 relative there,
// 4e-7 down to -87). 2^n from its exponent bits here; the AVX-512 loop below applies it with vscalefps.
constexpr float kLog2e = 1.44269504088896341f, kLn2 = 0.693147180559945309f;
constexpr float kExpPoly[5] = {0.9999997019767761f, 0.4999915063381195f, 0.1666763573884964f, 0.041897933930158615f,
                               0.008290314115583897f};  // p's coefficients, r^0 to r^4
constexpr float kDistanceFloor = -87.0f;                // exp underflows below it
// In place, by reference: a 32-byte vector passed by value to a function of the baseline target is an ABI error
// for Clang (and a warning for GCC) even when the call is inlined.
template <typename Float, typename Int>
[[gnu::always_inline]] inline void exp_nonpositive(Float& x) {
  // Round to nearest by adding and subtracting 1.5 * 2^23 (valid for |x log2 e| < 2^22).
  constexpr float kRound = 12582912.0f;
  const Float n = (x * kLog2e + kRound) - kRound;
  const Float r = x - n * kLn2;
  Float p = r * kExpPoly[4] + kExpPoly[3];
  p = p * r + kExpPoly[2];
  p = p * r + kExpPoly[1];
  p = p * r + kExpPoly[0];
  p = p * r + 1.0f;
  const Int bits = (__builtin_convertvector(n, Int) + 127) << 23;
  Float two_n;  // memcpy, not std::bit_cast: no function returning a 32-byte vector by value
  std::memcpy(&two_n, &bits, sizeof(two_n));
  x = p * two_n;
}

// One pass over the distances d_i = l_i - m (l_i <= m) for the softmax and the plain moments together (the
// softmax terms with d_i clamped to -87, below which exp underflows: such a term's share of Z is < 1e-37, and a
// -inf logit then adds about -1e-36 to S instead of making S, and the entropy, infinite):
// Z = sum_i exp(d_i), S = sum_i exp(d_i) d_i, D = sum_i d_i, Q = sum_i d_i^2, and min_i l_i. Eight float lanes
// summed over chunks of 1024 logits (error < 1e-5 relative), chunks summed in double. The exponential is most of
// the cost: the polynomial's fused multiply-adds (x86-64-v3 and up) halve it, and the moments ride along on loads
// already made (a separate pass would read the logits twice). Eight lanes, not sixteen: the accumulators and the
// exponential's temporaries then fit AVX2's 16 registers (docs/performance.md, "Tracing overhead"). Adds to `out` (sums
// of earlier chunks: a part summed in pieces of whole chunks gets the same bits as in one call).
TT_VOCAB_CLONES void distance_sums_portable(const float* l, size_t n, float m, LandscapeSums& out) {
  // Locals: through the reference every add would be a store.
  double z_sum = out.z, s_sum = out.s, d_sum = out.d, q_sum = out.q;
  Float8 lo = Float8{} + INFINITY;
  float min_logit = out.min;
  constexpr size_t kChunk = kLandscapeBlockLogits;
  for (size_t begin = 0; begin < n; begin += kChunk) {
    const size_t end = std::min(n, begin + kChunk);
    Float8 z8 = {}, s8 = {}, d8 = {}, q8 = {};
    size_t i = begin;
    for (; i + 8 <= end; i += 8) {
      Float8 x;
      std::memcpy(&x, l + i, sizeof(x));
      lo = x < lo ? x : lo;
      const Float8 d = x - m;
      d8 += d;
      q8 += d * d;
      const Float8 dc = d < kDistanceFloor ? Float8{} + kDistanceFloor : d;
      Float8 e = dc;
      exp_nonpositive<Float8, Int8>(e);
      z8 += e;
      s8 += e * dc;
    }
    for (; i < end; ++i) {  // tail, one lane
      const float d = l[i] - m, dc = d < kDistanceFloor ? kDistanceFloor : d;
      Float4 e = Float4{} + dc;
      exp_nonpositive<Float4, Int4>(e);
      z_sum += e[0];
      s_sum += static_cast<double>(e[0]) * dc;
      d_sum += d;
      q_sum += static_cast<double>(d) * d;
      min_logit = l[i] < min_logit ? l[i] : min_logit;
    }
    for (int j = 0; j < 8; ++j) z_sum += z8[j], s_sum += s8[j], d_sum += d8[j], q_sum += q8[j];
  }
  for (int j = 0; j < 8; ++j) min_logit = lo[j] < min_logit ? lo[j] : min_logit;
  out = {z_sum, s_sum, d_sum, q_sum, min_logit};
}

#if defined(__x86_64__)
// The same sums with AVX-512 intrinsics: the clamp as one max, n rounded by vrndscaleps and 2^n applied by
// vscalefps (the portable form needs two adds, a conversion, an integer add and shift and a multiply for those),
// and the tail in masked vectors through the same exponential: 16 operations a vector where the portable loop
// needs 23 (tt_bench BM_LogitLandscape measures both).
#define TT_AVX512 __attribute__((target("avx512f")))
// The sums' accumulators, per vector lane.
struct Avx512Sums {
  __m512 z, s, d, q;
};
// The lanes k of x's terms added to the sums and the minimum (the others keep theirs).
[[gnu::always_inline]] TT_AVX512 inline void add_distance_terms(const __m512& x, __mmask16 k, const __m512& origin,
                                                                Avx512Sums& sums, __m512& lo) {
  const __m512 floor = _mm512_set1_ps(kDistanceFloor), log2e = _mm512_set1_ps(kLog2e),
               minus_ln2 = _mm512_set1_ps(-kLn2);
  lo = _mm512_mask_min_ps(lo, k, x, lo);  // NaN: keeps lo, as the portable form's comparison does
  const __m512 dist = _mm512_sub_ps(x, origin);
  sums.d = _mm512_mask_add_ps(sums.d, k, sums.d, dist);
  sums.q = _mm512_mask3_fmadd_ps(dist, dist, sums.q, k);
  const __m512 dc = _mm512_max_ps(floor, dist);  // NaN: stays NaN (the second operand)
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(dc, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_fmadd_ps(n, minus_ln2, dc);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(kExpPoly[4]), r, _mm512_set1_ps(kExpPoly[3]));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpPoly[2]));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpPoly[1]));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpPoly[0]));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512 e = _mm512_scalef_ps(p, n);
  sums.z = _mm512_mask_add_ps(sums.z, k, sums.z, e);
  sums.s = _mm512_mask3_fmadd_ps(e, dc, sums.s, k);
}

TT_AVX512 void distance_sums_avx512(const float* l, size_t n, float m, LandscapeSums& out) {
  double z_sum = out.z, s_sum = out.s, d_sum = out.d, q_sum = out.q;
  __m512 lo = _mm512_set1_ps(INFINITY);
  const __m512 origin = _mm512_set1_ps(m);
  constexpr size_t kChunk = kLandscapeBlockLogits;
  for (size_t begin = 0; begin < n; begin += kChunk) {
    const size_t end = std::min(n, begin + kChunk);
    Avx512Sums sums[2];
    for (Avx512Sums& x : sums) x = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    size_t i = begin;
    for (; i + 32 <= end; i += 32)
      for (int h = 0; h < 2; ++h) add_distance_terms(_mm512_loadu_ps(l + i + 16 * h), 0xFFFF, origin, sums[h], lo);
    for (; i < end; i += 16) {  // tail: up to two vectors, the last one partial
      const __mmask16 k = end - i >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (end - i)) - 1);
      add_distance_terms(_mm512_maskz_loadu_ps(k, l + i), k, origin, sums[0], lo);
    }
    alignas(64) float zs[16], ss[16], ds[16], qs[16];
    _mm512_store_ps(zs, _mm512_add_ps(sums[0].z, sums[1].z));
    _mm512_store_ps(ss, _mm512_add_ps(sums[0].s, sums[1].s));
    _mm512_store_ps(ds, _mm512_add_ps(sums[0].d, sums[1].d));
    _mm512_store_ps(qs, _mm512_add_ps(sums[0].q, sums[1].q));
    for (int j = 0; j < 16; ++j) z_sum += zs[j], s_sum += ss[j], d_sum += ds[j], q_sum += qs[j];
  }
  alignas(64) float los[16];
  _mm512_store_ps(los, lo);
  float min_logit = out.min;
  for (int j = 0; j < 16; ++j) min_logit = los[j] < min_logit ? los[j] : min_logit;
  out = {z_sum, s_sum, d_sum, q_sum, min_logit};
}
#endif

// The k largest logits by insertion into a sorted list of ids (largest first; equal logits: the one inserted
// first, i.e. the lower id when ids come in increasing order). NaN ranks below every number: it enters a list that
// is not full yet, and the next number pushes it out.
class TopK {
 public:
  // Keeps k clamped to [1, logits.size()], going on from the list in `top` (empty: a new ranking; ids considered
  // later must be above those already in it, for ties).
  TopK(std::span<const float> logits, int k, std::vector<int32_t>& top)
      : logits_(logits), keep_(std::clamp<size_t>(static_cast<size_t>(std::max(k, 1)), 1, logits.size())), top_(top) {
    top_.reserve(keep_ + 1);
    if (full()) threshold_ = logits_[top_.back()];
  }
  bool full() const { return top_.size() == keep_; }
  // The k-th largest so far (-inf until k logits are in): what a logit must be above to enter, unless NaN (a NaN
  // is in the list: any number enters).
  float threshold() const { return threshold_; }
  void consider(size_t i) {
    const float l = logits_[i];
    if (full() && !above(l, threshold_)) return;  // ties keep the earlier id
    auto pos =
        std::upper_bound(top_.begin(), top_.end(), l, [&](float v, int32_t id) { return above(v, logits_[id]); });
    top_.insert(pos, static_cast<int32_t>(i));
    if (top_.size() > keep_) top_.pop_back();
    if (full()) threshold_ = logits_[top_.back()];
  }

 private:
  static bool above(float a, float b) { return a > b || (b != b && a == a); }
  std::span<const float> logits_;
  size_t keep_;
  std::vector<int32_t>& top_;
  float threshold_ = -INFINITY;
};

// Pass 1 of a part over logits [i, end): top-k and the maximum (into max_logit; NaNs skipped). Once the list is
// full, only the logits above its k-th are looked at one by one (rare after the first few thousand, and the list a
// part starts from is the previous part's: see landscape_part). Whatever the ranges a part is split into, the same
// logits change the list.
void top_k_pass(std::span<const float> logits, size_t i, size_t end, TopK& top, float& max_logit) {
  float m = max_logit;  // in a register: through a reference, every logit would wait for the previous one's store
  while (i < end) {
    if (top.full() && !std::isnan(top.threshold())) {
      const VocabHit c = next_above(logits.data(), i, end, top.threshold());
      m = c.passed_max > m ? c.passed_max : m;
      i = c.index;
      if (i == end) break;
    }
    const float l = logits[i];
    m = l > m ? l : m;
    top.consider(i++);
  }
  max_logit = m;
}

// Pass 2's origin: the part's maximum. A part of -inf logits only: distances to 0 (-inf, not NaN) and no softmax
// mass (exactly: its clamped terms, scaled to a very negative maximum elsewhere, would not be).
float distance_origin(float max_logit) { return max_logit == -INFINITY ? 0.0f : max_logit; }
void finish_part(const LandscapeSums& sums, float max_logit, LandscapePart& out) {
  out.z = sums.z, out.s = sums.s, out.d = sums.d, out.q = sums.q, out.min = sums.min;
  if (max_logit == -INFINITY) out.z = out.s = 0;
}

}  // namespace

void distance_sums(std::span<const float> logits, float origin, LandscapeSums& out, SumsPath path) {
#if defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512 && path == SumsPath::kWidest) return distance_sums_avx512(logits.data(), logits.size(), origin, out);
#endif
  distance_sums_portable(logits.data(), logits.size(), origin, out);
}

void landscape_part(std::span<const float> logits, size_t part, int k, LandscapePart& out,
                    std::span<const int32_t> seed) {
  out.n = landscape_part_logits(logits, part).size();
  if (out.n == 0) fail("landscape part {} of a {}-logit vocabulary", part, logits.size());
  const size_t begin = part * kLandscapePartLogits, end = begin + out.n;
  out.top.assign(seed.begin(), seed.end());
  TopK top(logits, k, out.top);
  float m = -INFINITY;
  top_k_pass(logits, begin, end, top, m);
  out.ref = distance_origin(m);
  LandscapeSums sums;
  distance_sums(logits.subspan(begin, out.n), out.ref, sums);
  finish_part(sums, m, out);
}

LogitLandscape merge_landscape(std::span<const float> logits, std::span<const LandscapePart> parts, int k) {
  if (logits.empty()) fail("logit landscape of an empty vocabulary");
  if (parts.size() != landscape_part_count(logits.size()))
    fail("internal error: {} landscape parts for {} logits", parts.size(), logits.size());
  const size_t n = logits.size();
  LogitLandscape out;
  // The top-k of the parts' top-k lists, in part order: the ids a single pass over the vocabulary keeps (each of
  // them is in its part's list; ties still go to the lower id, as every id of a part is below the next part's).
  // A list's ids of earlier parts (its seed) are left to their own part's list.
  TopK top(logits, k, out.top);
  size_t begin = 0;
  for (const LandscapePart& p : parts) {
    for (int32_t id : p.top)
      if (static_cast<size_t>(id) >= begin) top.consider(static_cast<size_t>(id));
    begin += p.n;
  }
  const double m = out.max_logit = logits[out.top[0]];

  // Each part's sums moved to the common origin m (delta = ref - m <= 0): e_i scales by exp(delta), d_i grows by
  // delta. Then Z = sum e_i, S = sum e_i d_i, H = log Z - S / Z; the moments from D and Q, the variance as
  // Q / n - (D / n)^2 in double.
  double z = 0, s = 0, d = 0, q = 0;
  float min_logit = INFINITY;
  for (const LandscapePart& p : parts) {
    const double delta = p.ref - m, scale = std::exp(delta), count = static_cast<double>(p.n);
    z += scale * p.z;
    s += scale * (p.s + delta * p.z);
    d += p.d + count * delta;
    q += p.q + 2 * delta * p.d + count * delta * delta;
    min_logit = p.min < min_logit ? p.min : min_logit;
  }
  out.log_z = std::log(z);
  out.entropy = std::max(0.0, out.log_z - s / z);
  const double mean_d = d / static_cast<double>(n);
  out.min_logit = min_logit;
  out.mean_logit = m + mean_d;
  out.std_logit = std::sqrt(std::max(0.0, q / static_cast<double>(n) - mean_d * mean_d));
  return out;
}

LogitLandscape logit_landscape(std::span<const float> logits, int k) {
  std::vector<LandscapePart> parts(landscape_part_count(logits.size()));
  for (size_t p = 0; p < parts.size(); ++p)
    landscape_part(logits, p, k, parts[p], p > 0 ? parts[p - 1].top : std::span<const int32_t>());
  return merge_landscape(logits, parts, k);
}

}  // namespace tt
