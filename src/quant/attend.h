// The online-softmax loop of ggml's flash-attention CPU kernel for one (token, head): one pass over the cache
// positions, never materialising the score matrix. `Steps` supplies the per-position work on its cache type:
//   float score(pos)                 K[pos] . Q (unscaled)
//   void rescale(float ms)           acc *= ms
//   void accumulate(pos, float vs)   acc += V[pos] * vs
// Returns 1/S (S the softmax normaliser; 0 when S is 0), by which the caller scales acc (as ggml does).
// Written once and instantiated by the scalar reference, the SIMD kernels and the F32-cache path, so the order of
// every float step (and the libm expf llama.cpp calls) is the same in all of them.
#pragma once

#include <cmath>
#include <cstdint>

namespace tt {

template <typename Steps>
float attend(Steps& steps, int64_t n_pos, float scale) {
  float max_score = -INFINITY, sum = 0.0f;
  for (int64_t pos = 0; pos < n_pos; ++pos) {
    const float s = steps.score(pos) * scale;
    float ms = 1.0f, vs = 1.0f;
    if (s > max_score) {
      ms = std::exp(max_score - s);
      max_score = s;
      steps.rescale(ms);
    } else {
      vs = std::exp(s - max_score);
    }
    steps.accumulate(pos, vs);
    sum = std::fma(sum, ms, vs);  // S = S*ms + vs, contracted to an FMA in llama.cpp's -march=native build
  }
  return sum == 0.0f ? 0.0f : 1.0f / sum;
}

// One (token, head) over an F16 cache, llama.cpp's VKQ16 path: q (d halves) against K and V rows `stride` bytes
// apart starting at k and v; acc is d halves of scratch; out = acc / S as floats.
#define TT_ATTEND_F16_DECL(name)                                                                                    \
  void name(const uint16_t* q, const uint8_t* k, const uint8_t* v, uint64_t stride, int64_t n_pos, int64_t d, \
            float scale, uint16_t* acc, float* out)

// Steps over a cache of element type T from three primitives: dot(k_row, q), scale(acc, ms), mad(acc, v_row, vs).
// F16: dot_f16_double / scale_f16 / mad_f16 of one kernel set; F32: the float versions in graph/kernels.cpp.
template <typename T, float (*kDot)(const T*, const T*, int64_t), void (*kScale)(T*, float, int64_t),
          void (*kMad)(T*, const T*, float, int64_t)>
struct AttendSteps {
  const T* q;
  const uint8_t *k, *v;  // position 0 of this head's K and V rows, `stride` bytes apart
  uint64_t stride;
  int64_t d;
  T* acc;
  float score(int64_t pos) const { return kDot(reinterpret_cast<const T*>(k + pos * stride), q, d); }
  void rescale(float ms) { kScale(acc, ms, d); }
  void accumulate(int64_t pos, float vs) { kMad(acc, reinterpret_cast<const T*>(v + pos * stride), vs, d); }
};

}  // namespace tt
