// The float-type kernels for AVX-512 F/BW/VL/DQ + VNNI (CMakeLists.txt compiles *_avx512.cpp with those flags):
// the F32 and F16 dot products in 512-bit vectors (references: ref::vec_dot_f32, ref::vec_dot_f16) and the rows
// of halves.
#define TT_SIMD_NS avx512
#define TT_SIMD_VNNI 1
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

void vec_dot_f16(int64_t n, float* result, const void* vx, const void* vy) {
  const uint16_t* x = static_cast<const uint16_t*>(vx);
  const uint16_t* y = static_cast<const uint16_t*>(vy);
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  auto load = [](const uint16_t* p) { return _mm512_cvtph_ps(load256(p)); };
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int k = 0; k < 4; ++k) acc[k] = _mm512_fmadd_ps(load(x + i + 16 * k), load(y + i + 16 * k), acc[k]);
  }
  for (; i + 16 <= n; i += 16) acc[0] = _mm512_fmadd_ps(load(x + i), load(y + i), acc[0]);
  double sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += static_cast<double>(fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]));
  *result = static_cast<float>(sum);
}

}  // namespace tt::avx512
