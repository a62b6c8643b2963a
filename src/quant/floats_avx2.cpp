// The float-type kernels for AVX2 + FMA + F16C (CMakeLists.txt compiles *_avx2.cpp with those flags): the F32
// and F16 dot products (references: ref::vec_dot_f32, ref::vec_dot_f16), the rows of halves, and llama.cpp's BF16
// orders on VDPBF16PS emulated (references: ref::vec_dot_bf16_avx512bf16, ref::dot_bf16_tinyblas).
#define TT_SIMD_NS avx2
#define TT_SIMD_VNNI 0
#include <cfloat>

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
}  // namespace

void vec_dot_bf16_dp(int64_t n, float* result, const void* vx, const void* vy) {
  const uint16_t* x = static_cast<const uint16_t*>(vx);
  const uint16_t* y = static_cast<const uint16_t*>(vy);
  Bf16Lanes c1, c2;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    dpbf16(c1, x + i, y + i);
    dpbf16(c2, x + i + 32, y + i + 32);
  }
  double sum = static_cast<double>(c1.reduce());
  sum += static_cast<double>(c2.reduce());
  for (; i < n; ++i) sum += static_cast<double>(bf16_to_fp32(x[i]) * bf16_to_fp32(y[i]));
  *result = static_cast<float>(sum);
}

void dot_bf16_tinyblas(int64_t n, float* result, const void* vx, const void* vy) {
  TT_CHECK(n % 32 == 0, "dot_bf16_tinyblas: n = {} is not a multiple of 32", n);
  const uint16_t* x = static_cast<const uint16_t*>(vx);
  const uint16_t* y = static_cast<const uint16_t*>(vy);
  Bf16Lanes acc;
  for (int64_t i = 0; i < n; i += 32) dpbf16(acc, x + i, y + i);
  *result = acc.reduce();
}

}  // namespace tt::avx2
