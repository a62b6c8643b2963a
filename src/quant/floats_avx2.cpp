// The float-type kernels for AVX2 + FMA + F16C (CMakeLists.txt compiles *_avx2.cpp with those flags): the F32
// and F16 dot products (references: ref::vec_dot_f32, ref::vec_dot_f16) and the rows of halves.
#define TT_SIMD_NS avx2
#define TT_SIMD_VNNI 0
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

}  // namespace tt::avx2
