// libm's expf on 4 floats at once, bit for bit: glibc's algorithm (sysdeps/ieee754/flt-32/e_expf.c, since 2.27) as
// its FMA build (__expf_fma) computes it, the build glibc runs on every CPU with AVX2 and FMA, so on every CPU that
// runs these kernels. llama.cpp's per-position flash attention calls expf; these lanes give the same floats
// (QuantExpf tests them against std::exp; an exhaustive run over all 2^32 inputs matched, docs/performance.md).
// x = (k + r) ln2 / 32 with integer k and |r| <= 1/2, in double: expf(x) = 2^(k/32) 2^(r/32), the first from a
// 32-entry table and the exponent bits, the second a cubic; one rounding to float at the end.
// Included by attention_x86.inc after simd_x86.h (TT_SIMD_NS).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tt::TT_SIMD_NS {
namespace {

namespace expf_libm_data {
// Bits of 2^(i/32) (rounded to double) minus i << 47: 2^(k/32) is kTable[k % 32] + (k << 47) as a double.
alignas(32) constexpr uint64_t kTable[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540};
constexpr double kInvLn2N = 0x1.71547652b82fep+5;  // 32 / ln 2
constexpr double kShift = 0x1.8p+52;               // adding it rounds to an integer in the low bits
constexpr double kC0 = 0x1.c6af84b912394p-20, kC1 = 0x1.ebfce50fac4f3p-13, kC2 = 0x1.62e42ff0c52d6p-6;
// Where glibc's special cases start: |x| >= 88 (the float's top 12 bits above 0x42a); then overflow above
// kOverflow, 0 below kUnderflow, the least denormal below kMayUnderflow.
constexpr float kOverflow = 0x1.62e42ep+6f, kUnderflow = -0x1.9fe368p+6f, kMayUnderflow = -0x1.9d1d9ep+6f;
}  // namespace expf_libm_data

inline __m128 expf_libm4(__m128 x) {
  using namespace expf_libm_data;
  const __m256d xd = _mm256_cvtps_pd(x);
  const __m256d inv = _mm256_set1_pd(kInvLn2N), shift = _mm256_set1_pd(kShift);
  const __m256d kd_shifted = _mm256_fmadd_pd(inv, xd, shift);
  const __m256d kd = _mm256_sub_pd(kd_shifted, shift);
  const __m256d r = _mm256_fmsub_pd(inv, xd, kd);
  const __m256i ki = _mm256_castpd_si256(kd_shifted);
  const __m256i t = _mm256_add_epi64(_mm256_i64gather_epi64(reinterpret_cast<const long long*>(kTable),
                                                            _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8),
                                     _mm256_slli_epi64(ki, 47));
  const __m256d z = _mm256_fmadd_pd(r, _mm256_set1_pd(kC0), _mm256_set1_pd(kC1));
  const __m256d r2 = _mm256_mul_pd(r, r);
  const __m256d y = _mm256_fmadd_pd(r, _mm256_set1_pd(kC2), _mm256_set1_pd(1.0));
  __m128 e = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_fmadd_pd(z, r2, y), _mm256_castsi256_pd(t)));
  const __m128i abstop = _mm_and_si128(_mm_srli_epi32(_mm_castps_si128(x), 20), _mm_set1_epi32(0x7ff));
  if (_mm_testz_si128(_mm_cmpgt_epi32(abstop, _mm_set1_epi32(0x42a)), _mm_set1_epi32(-1))) return e;
  // |x| >= 88, inf or NaN in some lane: glibc's tests, the later ones taking precedence as its earlier returns do.
  e = _mm_blendv_ps(e, _mm_set1_ps(0x1p-149f), _mm_cmp_ps(x, _mm_set1_ps(kMayUnderflow), _CMP_LT_OQ));
  e = _mm_blendv_ps(e, _mm_setzero_ps(), _mm_cmp_ps(x, _mm_set1_ps(kUnderflow), _CMP_LT_OQ));
  e = _mm_blendv_ps(e, _mm_set1_ps(__builtin_inff()), _mm_cmp_ps(x, _mm_set1_ps(kOverflow), _CMP_GT_OQ));
  e = _mm_blendv_ps(e, _mm_add_ps(x, x), _mm_castsi128_ps(_mm_cmpgt_epi32(abstop, _mm_set1_epi32(0x7f7))));
  const __m128i minus_inf = _mm_cmpeq_epi32(_mm_castps_si128(x), _mm_set1_epi32(static_cast<int32_t>(0xff800000u)));
  return _mm_blendv_ps(e, _mm_setzero_ps(), _mm_castsi128_ps(minus_inf));
}

}  // namespace
}  // namespace tt::TT_SIMD_NS
