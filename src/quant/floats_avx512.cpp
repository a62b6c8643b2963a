// The float-type kernels for AVX-512 F/BW/VL/DQ + VNNI (CMakeLists.txt compiles *_avx512.cpp with those flags):
// the F32 and F16 dot products in 512-bit vectors (references: ref::vec_dot_f32, ref::vec_dot_f16) and the rows
// of halves.
#define TT_SIMD_NS avx512
#define TT_SIMD_VNNI 1
#include <memory>

#include "quant/floats_x86.inc"

namespace tt::avx512 {

void vec_dot_f32(int64_t n, float* result, const void* vx, const void* vy) {
  const float* x = static_cast<const float*>(vx);
  const float* y = static_cast<const float*>(vy);
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16 * k), _mm512_loadu_ps(y + i + 16 * k), acc[k]);
    }
  }
  for (; i + 16 <= n; i += 16) acc[0] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), acc[0]);
  double sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += static_cast<double>(x[i] * y[i]);
  *result = static_cast<float>(sum);
}

namespace {
inline __attribute__((always_inline)) float dot_f16(int64_t n, const uint16_t* x, const uint16_t* y) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  auto load = [](const uint16_t* p) { return _mm512_cvtph_ps(load256(p)); };
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int k = 0; k < 4; ++k) acc[k] = _mm512_fmadd_ps(load(x + i + 16 * k), load(y + i + 16 * k), acc[k]);
  }
  for (; i + 16 <= n; i += 16) acc[0] = _mm512_fmadd_ps(load(x + i), load(y + i), acc[0]);
  // Rows shorter than a step (models of width 8) skip the reduction of zeros, which gives +0.0 all the same.
  double sum =
      i == 0 ? 0.0 : _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
  if (i < n) {  // the tail's products in one go (the conversion in hardware), then added one by one in double
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1);
    alignas(64) float p[16];
    _mm512_store_ps(p, _mm512_mul_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail, x + i)),
                                     _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail, y + i))));
    for (int64_t k = 0; k < n - i; ++k) sum += static_cast<double>(p[k]);
  }
  return static_cast<float>(sum);
}
}  // namespace

void vec_dot_f16(int64_t n, float* result, const void* vx, const void* vy) {
  *result = dot_f16(n, static_cast<const uint16_t*>(vx), static_cast<const uint16_t*>(vy));
}

namespace {
// _mm512_reduce_add_ps of 16 vectors at once: lane 4t + r of the result is the sum of v[4r + t]. The reduction's
// tree (lanes j and j + 8, then j + 4, j + 2, j + 1) is done for all 16 together, each level one add of two
// shuffles of a pair of vectors; addition commutes exactly, so each sum is bit for bit _mm512_reduce_add_ps's.
inline __attribute__((always_inline)) __m512 reduce_add_16x16(const __m512* v) {
  __m512 w[8], x[4], y[2];
  for (int p = 0; p < 8; ++p)
    w[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0x44),
                         _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0xEE));
  for (int p = 0; p < 4; ++p)
    x[p] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * p], w[2 * p + 1], 0x88),
                         _mm512_shuffle_f32x4(w[2 * p], w[2 * p + 1], 0xDD));
  for (int p = 0; p < 2; ++p) {
    const __m512d a = _mm512_castps_pd(x[2 * p]), b = _mm512_castps_pd(x[2 * p + 1]);
    y[p] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  return _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], 0x88), _mm512_shuffle_ps(y[0], y[1], 0xDD));
}

// dot_f16 of 4 rows x 4 tokens of n elements (n % 64 == 0), the tokens' halves already floats (the values
// dot_f16's conversion gives), bit for bit. dot_f16's 4 accumulators (element 16k + l of each 64-element step into
// accumulator k, lane l) are independent sums, so they are made one after the other: 16 live accumulators, 16 FMAs
// to 4 row conversions and 4 token loads. The 16 reductions run together.
void f16_block(int64_t n, const uint16_t* const* x, const float* const* y, float* out, int64_t ldo) {
  __m512 a01[16], a23[16];  // output 4r + t: dot_f16's (a0 + a1) and (a2 + a3)
  for (int k = 0; k < 4; ++k) {
    __m512 acc[16];
    for (__m512& a : acc) a = _mm512_setzero_ps();
    for (int64_t i = 16 * k; i < n; i += 64) {
      __m512 xr[4];
      for (int r = 0; r < 4; ++r) xr[r] = _mm512_cvtph_ps(load256(x[r] + i));
      for (int t = 0; t < 4; ++t) {
        const __m512 yt = _mm512_loadu_ps(y[t] + i);
        for (int r = 0; r < 4; ++r) acc[4 * r + t] = _mm512_fmadd_ps(xr[r], yt, acc[4 * r + t]);
      }
    }
    __m512* pair = k < 2 ? a01 : a23;
    for (int o = 0; o < 16; ++o) pair[o] = k % 2 == 0 ? acc[o] : _mm512_add_ps(pair[o], acc[o]);
  }
  for (int o = 0; o < 16; ++o) a01[o] = _mm512_add_ps(a01[o], a23[o]);
  const __m512 sums = reduce_add_16x16(a01);  // lane 4t + r: row r, token t
  _mm_storeu_ps(out, _mm512_castps512_ps128(sums));
  _mm_storeu_ps(out + ldo, _mm512_extractf32x4_ps(sums, 1));
  _mm_storeu_ps(out + 2 * ldo, _mm512_extractf32x4_ps(sums, 2));
  _mm_storeu_ps(out + 3 * ldo, _mm512_extractf32x4_ps(sums, 3));
}
}  // namespace

// vec_dot_f16 per (row, token). Rows of whole 64-element steps: blocks of 4 rows x 4 tokens (f16_block), the tokens
// converted to floats once per call; otherwise (and for the rows and tokens left over) dot_f16 inlined: an output
// matrix of 32,000 rows of 8 costs a call per row otherwise.
TT_TILE_DECL(tile_f16) {
  const auto* xb = static_cast<const uint8_t*>(x);
  const auto* yb = static_cast<const uint8_t*>(y);
  auto row = [&](int64_t r) { return reinterpret_cast<const uint16_t*>(xb + r * x_row); };
  auto token = [&](int64_t t) { return reinterpret_cast<const uint16_t*>(yb + t * y_row); };
  constexpr int kBlock = 4;
  int64_t r_done = 0, t_done = 0;
  if (n % 64 == 0 && nr >= kBlock && nt >= kBlock) {
    r_done = nr - nr % kBlock;
    t_done = nt - nt % kBlock;
    const auto tokens = std::make_unique_for_overwrite<float[]>(kBlock * n);
    for (int64_t t0 = 0; t0 < t_done; t0 += kBlock) {
      const float* yt[kBlock];
      for (int t = 0; t < kBlock; ++t) {
        fp16_to_fp32_row(token(t0 + t), tokens.get() + t * n, n);
        yt[t] = tokens.get() + t * n;
      }
      for (int64_t r0 = 0; r0 < r_done; r0 += kBlock) {
        const uint16_t* xr[kBlock] = {row(r0), row(r0 + 1), row(r0 + 2), row(r0 + 3)};
        f16_block(n, xr, yt, out + t0 * ldo + r0, ldo);
      }
    }
  }
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t r = t < t_done ? r_done : 0; r < nr; ++r) out[t * ldo + r] = dot_f16(n, row(r), token(t));
}

}  // namespace tt::avx512
