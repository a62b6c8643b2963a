// The float-type kernels for AVX-512 F/BW/VL/DQ + VNNI (CMakeLists.txt compiles *_avx512.cpp with those flags):
// the F32 and F16 dot products in 512-bit vectors (references: ref::vec_dot_f32, ref::vec_dot_f16) and the rows
// of halves.
#define TT_SIMD_NS avx512
#define TT_SIMD_VNNI 1
#include <vector>

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
// dot_f16 for kRows rows x kTokens tokens of n elements (n % 64 == 0), the tokens' halves already floats (the same
// values the conversion in dot_f16 gives): each row's conversion serves every token, and each output keeps dot_f16's
// 4 accumulators of 16 lanes and its reduction, bit for bit.
template <int kRows, int kTokens>
void f16_block(int64_t n, const uint16_t* const* x, const float* const* y, float* out, int64_t ldo) {
  __m512 acc[kRows][kTokens][4];
  for (auto& row : acc)
    for (auto& token : row)
      for (__m512& a : token) a = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 64)
    for (int k = 0; k < 4; ++k) {
      __m512 xr[kRows];
      for (int r = 0; r < kRows; ++r) xr[r] = _mm512_cvtph_ps(load256(x[r] + i + 16 * k));
      for (int t = 0; t < kTokens; ++t) {
        const __m512 yt = _mm512_loadu_ps(y[t] + i + 16 * k);
        for (int r = 0; r < kRows; ++r) acc[r][t][k] = _mm512_fmadd_ps(xr[r], yt, acc[r][t][k]);
      }
    }
  for (int r = 0; r < kRows; ++r)
    for (int t = 0; t < kTokens; ++t) {
      const __m512* a = acc[r][t];
      const double sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])));
      out[t * ldo + r] = static_cast<float>(sum);
    }
}
}  // namespace

// vec_dot_f16 per (row, token). Rows of whole 64-element steps: 2 rows x 3 tokens a block (24 accumulators), the
// tokens converted to floats once per call; otherwise (and for the rows and tokens left over) dot_f16 inlined: an
// output matrix of 32,000 rows of 8 costs a call per row otherwise.
TT_TILE_DECL(tile_f16) {
  const auto* xb = static_cast<const uint8_t*>(x);
  const auto* yb = static_cast<const uint8_t*>(y);
  auto row = [&](int64_t r) { return reinterpret_cast<const uint16_t*>(xb + r * x_row); };
  auto token = [&](int64_t t) { return reinterpret_cast<const uint16_t*>(yb + t * y_row); };
  constexpr int kRows = 2, kTokens = 3;
  int64_t r_done = 0, t_done = 0;
  if (n % 64 == 0 && nr >= kRows && nt >= kTokens) {
    r_done = nr - nr % kRows;
    t_done = nt - nt % kTokens;
    std::vector<float> yf(kTokens * n);
    for (int64_t t0 = 0; t0 < t_done; t0 += kTokens) {
      const float* yt[kTokens];
      for (int t = 0; t < kTokens; ++t) {
        fp16_to_fp32_row(token(t0 + t), yf.data() + t * n, n);
        yt[t] = yf.data() + t * n;
      }
      for (int64_t r0 = 0; r0 < r_done; r0 += kRows) {
        const uint16_t* xr[kRows] = {row(r0), row(r0 + 1)};
        f16_block<kRows, kTokens>(n, xr, yt, out + t0 * ldo + r0, ldo);
      }
    }
  }
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t r = t < t_done ? r_done : 0; r < nr; ++r) out[t * ldo + r] = dot_f16(n, row(r), token(t));
}

}  // namespace tt::avx512
