// The float-type kernels for AVX2 + FMA + F16C (CMakeLists.txt compiles *_avx2.cpp with those flags): the F32
// and F16 dot products and tiles (references: ref::vec_dot_f32, ref::vec_dot_f16), the rows of halves, and
// llama.cpp's BF16 orders on VDPBF16PS, by FMAs where exact and emulated elsewhere (references:
// ref::vec_dot_bf16_avx512bf16, ref::dot_bf16_tinyblas).
#define TT_SIMD_NS avx2
#define TT_SIMD_VNNI 0
#include <algorithm>
#include <cfloat>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "quant/floats_x86.inc"

namespace tt::avx2 {

// Four 8-lane FMA accumulators, leftovers added in double (as ggml's SIMD vec_dot_f32 / f16).
void vec_dot_f32(int64_t n, float* result, const void* vx, const void* vy) {
  const float* x = static_cast<const float*>(vx);
  const float* y = static_cast<const float*>(vy);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * k), _mm256_loadu_ps(y + i + 8 * k), acc[k]);
    }
  }
  double sum = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += static_cast<double>(x[i] * y[i]);
  *result = static_cast<float>(sum);
}

namespace {
// hsum of each of v[0..7] (its tree: lanes j + j+4, then the pairs 0+2 and 1+3, then those two), eight at once:
// lanes 0-3 hold v[0], v[2], v[4], v[6]'s sums and lanes 4-7 v[1], v[3], v[5], v[7]'s.
inline __m256 hsum8(const __m256* v) {
  __m256 w[4];
  for (int i = 0; i < 4; ++i)
    w[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20),
                         _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31));
  __m256 q[2];
  for (int i = 0; i < 2; ++i)
    q[i] = _mm256_add_ps(_mm256_shuffle_ps(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm256_add_ps(_mm256_shuffle_ps(q[0], q[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm256_shuffle_ps(q[0], q[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// vec_dot_f32 for 2 rows x 4 tokens: each output's four accumulators (elements 8k .. 8k + 7 of every 32-element
// step) built one k after another, every output's at once (its products' 32 accumulators at once would not fit
// the registers; one k's do), then vec_dot_f32's sums for all eight outputs in one register: at a small model's
// rows (stories260K's 64 and 172) the sums and the tail cost as much as the products.
void f32_block(int64_t n, const float* const* x, const float* const* y, float* out, int64_t ldo) {
  constexpr int kRows = 2, kTokens = 4, kOut = kRows * kTokens;
  const int64_t steps = n / 32 * 32;
  __m256 s01[kOut], s23[kOut];  // (acc0 + acc1) and (acc2 + acc3)
  for (int k = 0; k < 4; ++k) {
    __m256 a[kOut];  // a[2t + r]: output (r, t)'s accumulator k
    for (__m256& v : a) v = _mm256_setzero_ps();
    for (int64_t i = 8 * k; i < steps; i += 32) {
      const __m256 x0 = _mm256_loadu_ps(x[0] + i), x1 = _mm256_loadu_ps(x[1] + i);
      for (int t = 0; t < kTokens; ++t) {
        const __m256 yv = _mm256_loadu_ps(y[t] + i);
        a[2 * t] = _mm256_fmadd_ps(x0, yv, a[2 * t]);
        a[2 * t + 1] = _mm256_fmadd_ps(x1, yv, a[2 * t + 1]);
      }
    }
    __m256* s = k < 2 ? s01 : s23;
    for (int o = 0; o < kOut; ++o) s[o] = k % 2 == 0 ? a[o] : _mm256_add_ps(s[o], a[o]);
  }
  for (int o = 0; o < kOut; ++o) s01[o] = _mm256_add_ps(s01[o], s23[o]);
  const __m256 sums = hsum8(s01);  // row 0's four tokens, then row 1's
  alignas(32) float res[kOut];
  if (steps == n) {
    _mm256_store_ps(res, sums);
  } else {  // the tail in double, each output's products in order (vec_dot_f32's leftovers), four outputs a vector
    __m256d acc[kRows] = {_mm256_cvtps_pd(_mm256_castps256_ps128(sums)),
                          _mm256_cvtps_pd(_mm256_extractf128_ps(sums, 1))};
    for (int64_t i = steps; i < n; ++i) {
      const __m128 yi = _mm_setr_ps(y[0][i], y[1][i], y[2][i], y[3][i]);
      for (int r = 0; r < kRows; ++r)
        acc[r] = _mm256_add_pd(acc[r], _mm256_cvtps_pd(_mm_mul_ps(_mm_set1_ps(x[r][i]), yi)));
    }
    for (int r = 0; r < kRows; ++r) _mm_store_ps(res + 4 * r, _mm256_cvtpd_ps(acc[r]));
  }
  for (int r = 0; r < kRows; ++r)
    for (int t = 0; t < kTokens; ++t) out[t * ldo + r] = res[4 * r + t];
}

// A tile of rows x tokens whose elements are T, in blocks of kRows x kTokens through kBlock (every output as kDot
// computes it, several at once), the outputs outside whole blocks one by one through kDot.
template <typename T, int kRows, int kTokens,
          void (*kBlock)(int64_t, const T* const*, const T* const*, float*, int64_t),
          void (*kDot)(int64_t, float*, const void*, const void*)>
void tile_in_blocks(int64_t n, int64_t nr, int64_t nt, const void* x, uint64_t x_row, const void* y, uint64_t y_row,
                    float* out, int64_t ldo) {
  const auto* xb = static_cast<const uint8_t*>(x);
  const auto* yb = static_cast<const uint8_t*>(y);
  auto row = [&](int64_t r) { return reinterpret_cast<const T*>(xb + r * x_row); };
  auto token = [&](int64_t t) { return reinterpret_cast<const T*>(yb + t * y_row); };
  const int64_t r_done = nr - nr % kRows, t_done = nt - nt % kTokens;
  for (int64_t t = 0; t < t_done; t += kTokens)
    for (int64_t r = 0; r < r_done; r += kRows) {
      const T* rows[kRows];
      const T* tokens[kTokens];
      for (int i = 0; i < kRows; ++i) rows[i] = row(r + i);
      for (int j = 0; j < kTokens; ++j) tokens[j] = token(t + j);
      kBlock(n, rows, tokens, out + t * ldo + r, ldo);
    }
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t r = t < t_done ? r_done : 0; r < nr; ++r) kDot(n, out + t * ldo + r, row(r), token(t));
}
}  // namespace

// vec_dot_f32 per (row, token): blocks of 2 rows x 4 tokens, the rest one by one (docs/performance.md, "AVX2
// machines"). A model with F32 weights (stories260K) otherwise pays a call and a reduction per output.
TT_TILE_DECL(tile_f32) { tile_in_blocks<float, 2, 4, f32_block, vec_dot_f32>(n, nr, nt, x, x_row, y, y_row, out, ldo); }

namespace {
// dot_f16_tinyblas for kRows rows x kTokens tokens: each output's 16 lanes (two registers) take the reference's FMAs
// in its order; each row's halves are converted once for the block's tokens and each token's once for its rows.
template <int kRows, int kTokens>
void f16_tinyblas_block(int64_t n, const uint16_t* const* x, const uint16_t* const* y, float* out, int64_t ldo) {
  __m256 acc[2][kRows][kTokens];
  for (auto& half : acc)
    for (auto& row : half)
      for (__m256& a : row) a = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 16)
    for (int h = 0; h < 2; ++h) {
      __m256 a[kRows];
      for (int r = 0; r < kRows; ++r) a[r] = _mm256_cvtph_ps(load128(x[r] + i + 8 * h));
      for (int t = 0; t < kTokens; ++t) {
        const __m256 b = _mm256_cvtph_ps(load128(y[t] + i + 8 * h));
        for (int r = 0; r < kRows; ++r) acc[h][r][t] = _mm256_fmadd_ps(a[r], b, acc[h][r][t]);
      }
    }
  for (int r = 0; r < kRows; ++r)
    for (int t = 0; t < kTokens; ++t) out[t * ldo + r] = reduce_add_16(acc[0][r][t], acc[1][r][t]);
}
}  // namespace

// Blocks of 2 rows x 3 tokens (docs/performance.md, "AVX2 machines"), the rest output by output.
TT_TILE_DECL(tile_f16_tinyblas) {
  TT_CHECK(n % 16 == 0, "tile_f16_tinyblas: n = {} is not a multiple of 16", n);
  tile_in_blocks<uint16_t, 2, 3, f16_tinyblas_block<2, 3>, dot_f16_tinyblas>(n, nr, nt, x, x_row, y, y_row, out, ldo);
}

void vec_dot_f16(int64_t n, float* result, const void* vx, const void* vy) {
  const uint16_t* x = static_cast<const uint16_t*>(vx);
  const uint16_t* y = static_cast<const uint16_t*>(vy);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      const __m256 a = _mm256_cvtph_ps(load128(x + i + 8 * k));
      const __m256 b = _mm256_cvtph_ps(load128(y + i + 8 * k));
      acc[k] = _mm256_fmadd_ps(a, b, acc[k]);
    }
  }
  double sum = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += static_cast<double>(fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]));
  *result = static_cast<float>(sum);
}

namespace {
// vec_dot_f16 for 4 rows of fewer than 32 elements, all of them vec_dot_f16's tail (each product rounded to float,
// then added in double in element order, from the +0 of the empty accumulators): the rows' products transposed so
// each double lane holds one row's sum. An output matrix of 32,000 rows of 8 otherwise costs a call per row.
void f16_short_rows4(int64_t n, const uint16_t* const x[4], const uint16_t* y, float* out) {
  __m256d sum = _mm256_setzero_pd();
  for (int64_t i0 = 0; i0 < n; i0 += 8) {
    const int64_t m = std::min<int64_t>(8, n - i0);
    auto halves = [&](const uint16_t* v) {
      if (m == 8) return load128(v + i0);
      alignas(16) uint16_t part[8] = {};
      std::memcpy(part, v + i0, m * sizeof(uint16_t));
      return load128(part);
    };
    const __m256 yv = _mm256_cvtph_ps(halves(y));
    __m256 p[4];
    for (int r = 0; r < 4; ++r) p[r] = _mm256_mul_ps(_mm256_cvtph_ps(halves(x[r])), yv);
    for (int h = 0; h < 2 && 4 * h < m; ++h) {
      __m128 e[4];
      for (int r = 0; r < 4; ++r) e[r] = h == 0 ? _mm256_castps256_ps128(p[r]) : _mm256_extractf128_ps(p[r], 1);
      _MM_TRANSPOSE4_PS(e[0], e[1], e[2], e[3]);  // e[k]: element 4h + k of the 4 rows
      for (int k = 0; k < 4 && 4 * h + k < m; ++k) sum = _mm256_add_pd(sum, _mm256_cvtps_pd(e[k]));
    }
  }
  _mm_storeu_ps(out, _mm256_cvtpd_ps(sum));
}
}  // namespace

// vec_dot_f16 per (row, token); rows shorter than a 32-element step 4 at a time (f16_short_rows4).
TT_TILE_DECL(tile_f16) {
  const auto* xb = static_cast<const uint8_t*>(x);
  const auto* yb = static_cast<const uint8_t*>(y);
  auto row = [&](int64_t r) { return reinterpret_cast<const uint16_t*>(xb + r * x_row); };
  for (int64_t t = 0; t < nt; ++t) {
    const auto* yt = reinterpret_cast<const uint16_t*>(yb + t * y_row);
    int64_t r = 0;
    if (n < 32) {
      alignas(16) float four[4];
      for (; r + 4 <= nr; r += 4) {
        const uint16_t* rows[4] = {row(r), row(r + 1), row(r + 2), row(r + 3)};
        f16_short_rows4(n, rows, yt, four);
        for (int k = 0; k < 4; ++k) out[t * ldo + r + k] = four[k];
      }
    }
    for (; r < nr; ++r) vec_dot_f16(n, out + t * ldo + r, row(r), yt);
  }
}

namespace {
// VDPBF16PS's 16 float lanes as two AVX2 registers: lanes 0..7 (elements 0..15 of a 32-element step), 8..15.
struct Bf16Lanes {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  float reduce() const { return reduce_add_16(lo, hi); }
};

// BF16 values (in the top halves of 32-bit lanes) as floats, denormals read as +0, as the instruction reads them.
inline __m256 bf16_daz(__m256i bits) {
  const __m256i exponent = _mm256_and_si256(bits, _mm256_set1_epi32(0x7F800000));
  return _mm256_castsi256_ps(_mm256_andnot_si256(_mm256_cmpeq_epi32(exponent, _mm256_setzero_si256()), bits));
}

// acc + x * y, the product and the sum each rounded, a denormal sum flushed to its signed zero.
inline __m256 add_product_ftz(__m256 acc, __m256 x, __m256 y) {
  __m256 p = _mm256_mul_ps(x, y);
  asm("" : "+x"(p));  // keeps the compiler from fusing it into an FMA, which rounds once
  const __m256 s = _mm256_add_ps(acc, p), sign = _mm256_set1_ps(-0.0f);
  const __m256 tiny = _mm256_cmp_ps(_mm256_andnot_ps(sign, s), _mm256_set1_ps(FLT_MIN), _CMP_LT_OQ);
  return _mm256_andnot_ps(_mm256_andnot_ps(sign, tiny), s);
}

// One VDPBF16PS: 32 elements of x and y into the 16 lanes, lane l taking the pair (2l + 1, 2l) in that order.
inline void dpbf16(Bf16Lanes& acc, const uint16_t* x, const uint16_t* y) {
  const __m256i odd = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  for (int h = 0; h < 2; ++h) {
    const __m256i a = load256(x + 16 * h), b = load256(y + 16 * h);
    __m256& c = h == 0 ? acc.lo : acc.hi;
    c = add_product_ftz(c, bf16_daz(_mm256_and_si256(a, odd)), bf16_daz(_mm256_and_si256(b, odd)));
    c = add_product_ftz(c, bf16_daz(_mm256_slli_epi32(a, 16)), bf16_daz(_mm256_slli_epi32(b, 16)));
  }
}

// Where FMAs give the instruction's sums bit for bit. A BF16 value is an integer times 2^(E - 134), E its biased
// exponent, so every product, and every sum of products, is a multiple of 2^(Ex + Ey - 268) for the smallest
// exponents of the non-zero values of the two operands. Where that is at least 2^-126 (Ex + Ey >= 142), no input,
// product or sum is denormal (nothing to flush), and a product's 16 significant bits fit a float exactly: rounding
// it before the add (the instruction) or not (an FMA) gives the same sum. Largest exponents whose product stays
// below 2^128 (Ex + Ey <= 380) keep the products finite; inf and NaN take the emulation.
struct Bf16Span {
  uint16_t min_minus1 = 0xFFFF;  // the smallest non-zero magnitude minus 1 (0xFFFF: every value is zero)
  uint16_t max = 0;              // the largest magnitude
};
Bf16Span merge(Bf16Span a, Bf16Span b) { return {std::min(a.min_minus1, b.min_minus1), std::max(a.max, b.max)}; }

// Bf16Span over 16-bit lanes, as the values stream by.
struct Bf16SpanLanes {
  __m256i lo = _mm256_set1_epi16(-1), hi = _mm256_setzero_si256();
  void add(__m256i v) {
    const __m256i m = _mm256_and_si256(v, _mm256_set1_epi16(0x7FFF));
    lo = _mm256_min_epu16(lo, _mm256_sub_epi16(m, _mm256_set1_epi16(1)));  // zero wraps to 0xFFFF
    hi = _mm256_max_epu16(hi, m);
  }
  Bf16Span reduce() const {
    const __m128i lo8 = _mm_min_epu16(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1));
    const __m128i hi8 = _mm_max_epu16(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1));
    const __m128i ones = _mm_set1_epi16(-1);
    return {static_cast<uint16_t>(_mm_cvtsi128_si32(_mm_minpos_epu16(lo8))),
            static_cast<uint16_t>(~_mm_cvtsi128_si32(_mm_minpos_epu16(_mm_xor_si128(hi8, ones))))};
  }
};

// The span of n values; lanes holds the ones before i0 (already seen).
Bf16Span bf16_span(const uint16_t* v, int64_t n, Bf16SpanLanes lanes = {}, int64_t i0 = 0) {
  int64_t i = i0;
  for (; i + 16 <= n; i += 16) lanes.add(load256(v + i));
  Bf16Span span = lanes.reduce();
  for (; i < n; ++i) {
    const uint16_t m = v[i] & 0x7FFF;
    span = merge(span, {static_cast<uint16_t>(m - 1), m});
  }
  return span;
}

bool fma_exact(Bf16Span x, Bf16Span y) {
  constexpr uint16_t kInf = 0x7F80;
  if (x.max >= kInf || y.max >= kInf) return false;
  if (x.min_minus1 == 0xFFFF || y.min_minus1 == 0xFFFF) return true;  // every product is zero
  const int ex = (x.min_minus1 + 1) >> 7, ey = (y.min_minus1 + 1) >> 7;
  return ex >= 1 && ey >= 1 && ex + ey >= 142 && (x.max >> 7) + (y.max >> 7) <= 380;
}

// A 32-element step's operand as the instruction pairs it: per half, the odd elements' and the even elements'
// floats in each 32-bit lane.
struct Bf16Step {
  __m256 odd[2], even[2];
};
inline Bf16Step bf16_step(const uint16_t* v, Bf16SpanLanes* span = nullptr) {
  Bf16Step s;
  for (int h = 0; h < 2; ++h) {
    const __m256i a = load256(v + 16 * h);
    if (span) span->add(a);
    s.odd[h] = _mm256_castsi256_ps(_mm256_and_si256(a, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
    s.even[h] = _mm256_castsi256_ps(_mm256_slli_epi32(a, 16));
  }
  return s;
}
// dpbf16 where fma_exact holds: the same lanes and order, each product fused with its sum.
inline void dpbf16_fma(Bf16Lanes& acc, const Bf16Step& x, const Bf16Step& y) {
  acc.lo = _mm256_fmadd_ps(x.even[0], y.even[0], _mm256_fmadd_ps(x.odd[0], y.odd[0], acc.lo));
  acc.hi = _mm256_fmadd_ps(x.even[1], y.even[1], _mm256_fmadd_ps(x.odd[1], y.odd[1], acc.hi));
}

// ggml_vec_dot_bf16's order: two accumulators over alternate 32-element steps, the tail in double. The FMAs take y
// as steps already split (token_steps: a token's steps serve all the rows of a call) and can also give x's span
// (kSpan: *x_span), for the caller to check them with: the row streams once.
template <bool kFused, bool kSpan = false>
float dot_bf16_dp(int64_t n, const uint16_t* x, const uint16_t* y, const Bf16Step* y_steps = nullptr,
                  Bf16Span* x_span = nullptr) {
  static_assert(kFused || !kSpan);
  Bf16Lanes c1, c2;
  Bf16SpanLanes lanes;
  Bf16SpanLanes* span = kSpan ? &lanes : nullptr;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    if constexpr (kFused) {
      dpbf16_fma(c1, bf16_step(x + i, span), y_steps[i / 32]);
      dpbf16_fma(c2, bf16_step(x + i + 32, span), y_steps[i / 32 + 1]);
    } else {
      dpbf16(c1, x + i, y + i);
      dpbf16(c2, x + i + 32, y + i + 32);
    }
  }
  if constexpr (kSpan) *x_span = bf16_span(x, n, lanes, i);
  double sum = static_cast<double>(c1.reduce());
  sum += static_cast<double>(c2.reduce());
  for (; i < n; ++i) sum += static_cast<double>(bf16_to_fp32(x[i]) * bf16_to_fp32(y[i]));
  return static_cast<float>(sum);
}

// tinyBLAS's order, emulated: one accumulator over 32-element steps, one reduction.
float dot_bf16_tinyblas_emulated(int64_t n, const uint16_t* x, const uint16_t* y) {
  Bf16Lanes acc;
  for (int64_t k = 0; k < n; k += 32) dpbf16(acc, x + k, y + k);
  return acc.reduce();
}

// tinyBLAS's order over kRows rows x kTokens tokens through FMAs (where fma_exact holds).
template <int kRows, int kTokens>
void tinyblas_fma_block(int64_t n, const uint8_t* x, uint64_t x_row, const uint8_t* y, uint64_t y_row, float* out,
                        int64_t ldo) {
  Bf16Lanes acc[kRows][kTokens];
  for (int64_t k = 0; k < n; k += 32) {
    Bf16Step a[kRows];
    for (int r = 0; r < kRows; ++r) a[r] = bf16_step(reinterpret_cast<const uint16_t*>(x + r * x_row) + k);
    for (int t = 0; t < kTokens; ++t) {
      const Bf16Step b = bf16_step(reinterpret_cast<const uint16_t*>(y + t * y_row) + k);
      for (int r = 0; r < kRows; ++r) dpbf16_fma(acc[r][t], a[r], b);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int t = 0; t < kTokens; ++t) out[t * ldo + r] = acc[r][t].reduce();
}
using BlockFn = void (*)(int64_t, const uint8_t*, uint64_t, const uint8_t*, uint64_t, float*, int64_t);
constexpr int kBlockRows = 2, kBlockTokens = 4;
constexpr BlockFn kFmaBlocks[kBlockRows][kBlockTokens] = {
    {tinyblas_fma_block<1, 1>, tinyblas_fma_block<1, 2>, tinyblas_fma_block<1, 3>, tinyblas_fma_block<1, 4>},
    {tinyblas_fma_block<2, 1>, tinyblas_fma_block<2, 2>, tinyblas_fma_block<2, 3>, tinyblas_fma_block<2, 4>}};

// The spans of nt token rows, in this thread's buffer (grown, never shrunk: no allocation per call).
const Bf16Span* token_spans(int64_t n, int64_t nt, const uint8_t* y, uint64_t y_row) {
  Bf16Span* spans = thread_buffer<Bf16Span>(nt);
  for (int64_t t = 0; t < nt; ++t) spans[t] = bf16_span(reinterpret_cast<const uint16_t*>(y + t * y_row), n);
  return spans;
}

// The whole 32-element steps of nt token rows, split once for all the rows of a call (token t's from
// t * n / 32; in this thread's buffer, as above).
const Bf16Step* token_steps(int64_t n, int64_t nt, const uint8_t* y, uint64_t y_row) {
  const int64_t per_token = n / 32;
  Bf16Step* steps = thread_buffer<Bf16Step>(nt * per_token);
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t k = 0; k < per_token; ++k)
      steps[t * per_token + k] = bf16_step(reinterpret_cast<const uint16_t*>(y + t * y_row) + 32 * k);
  return steps;
}
}  // namespace

void vec_dot_bf16_dp(int64_t n, float* result, const void* x, const void* y) {
  tile_bf16_dp(n, 1, 1, x, 0, y, 0, result, 0);
}

// Each token's span read once, each row's as its first token's FMAs stream it; a (row, token) whose spans fma_exact
// allows keeps the FMAs' result, the others take the emulation. The tokens' steps are split once for all the rows.
TT_TILE_DECL(tile_bf16_dp) {
  if (nt == 0) return;
  const auto* xb = static_cast<const uint8_t*>(x);
  const auto* yb = static_cast<const uint8_t*>(y);
  const Bf16Span* tokens = token_spans(n, nt, yb, y_row);
  const Bf16Step* steps = token_steps(n, nt, yb, y_row);
  for (int64_t r = 0; r < nr; ++r) {
    const auto* xr = reinterpret_cast<const uint16_t*>(xb + r * x_row);
    Bf16Span row;
    for (int64_t t = 0; t < nt; ++t) {
      const auto* yt = reinterpret_cast<const uint16_t*>(yb + t * y_row);
      const Bf16Step* yt_steps = steps + t * (n / 32);
      const float fused =
          t == 0 ? dot_bf16_dp<true, true>(n, xr, yt, yt_steps, &row) : dot_bf16_dp<true>(n, xr, yt, yt_steps);
      out[t * ldo + r] = fma_exact(row, tokens[t]) ? fused : dot_bf16_dp<false>(n, xr, yt);
    }
  }
}

void dot_bf16_tinyblas(int64_t n, float* result, const void* x, const void* y) {
  tile_bf16_tinyblas(n, 1, 1, x, 0, y, 0, result, 0);
}

// Blocks of 2 rows x 4 tokens (docs/performance.md, "AVX2 machines") through the FMAs where their spans allow, else
// the emulation per output.
TT_TILE_DECL(tile_bf16_tinyblas) {
  TT_CHECK(n % 32 == 0, "tile_bf16_tinyblas: n = {} is not a multiple of 32", n);
  const auto* xb = static_cast<const uint8_t*>(x);
  const auto* yb = static_cast<const uint8_t*>(y);
  const Bf16Span* tokens = token_spans(n, nt, yb, y_row);
  for (int64_t r = 0; r < nr; r += kBlockRows) {
    const int64_t rows = std::min<int64_t>(kBlockRows, nr - r);
    Bf16Span row_span;
    for (int64_t i = 0; i < rows; ++i)
      row_span = merge(row_span, bf16_span(reinterpret_cast<const uint16_t*>(xb + (r + i) * x_row), n));
    for (int64_t t = 0; t < nt; t += kBlockTokens) {
      const int64_t cols = std::min<int64_t>(kBlockTokens, nt - t);
      Bf16Span token_span;
      for (int64_t j = 0; j < cols; ++j) token_span = merge(token_span, tokens[t + j]);
      if (fma_exact(row_span, token_span)) {
        kFmaBlocks[rows - 1][cols - 1](n, xb + r * x_row, x_row, yb + t * y_row, y_row, out + t * ldo + r, ldo);
        continue;
      }
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          out[(t + j) * ldo + r + i] =
              dot_bf16_tinyblas_emulated(n, reinterpret_cast<const uint16_t*>(xb + (r + i) * x_row),
                                         reinterpret_cast<const uint16_t*>(yb + (t + j) * y_row));
    }
  }
}

}  // namespace tt::avx2
