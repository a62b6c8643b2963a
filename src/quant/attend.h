// The online-softmax loop of ggml's flash-attention CPU kernel: for each query (token, head), one pass over the
// cache positions, never materialising the score matrix. A call serves Steps::kQueries queries that read the same
// K and V rows (the heads of one GQA group, or neighbouring tokens of one head), each with its own number of
// positions; `Steps` supplies the per-position work on its cache type:
//   void score(pos, float* s)              s[qi * kScoreStride] = K[pos] . Q_qi (unscaled), for every query
//   void rescale(int qi, float ms)         acc_qi *= ms
//   void accumulate(int qi, pos, float vs) acc_qi += V[pos] * vs
// inv[qi] = 1/S (S the softmax normaliser; 0 when S is 0), by which the caller scales acc_qi (as ggml does).
// Written once and instantiated by the scalar reference, the SIMD kernels and the F32-cache path, so the order of
// every float step (and the libm expf llama.cpp calls) is the same in all of them, and each query's steps are
// those of a call with that query alone.
#pragma once

#include <cmath>
#include <cstdint>

namespace tt {

constexpr int64_t kAttendBlock = 32;                // positions per block
constexpr int64_t kScoreStride = 2 * kAttendBlock;  // between queries in a score buffer (two blocks)

// The softmax chain over one block of one query's scores: for position j, whether the running maximum moved (then
// the accumulator is rescaled by rescales[j]) and the weight of its V row. Kept out of line: its libm calls would
// otherwise make the caller spill its register-resident accumulators at every position. Static: each kernel file
// keeps its own copy, built with its instruction set (one shared copy from a baseline file would call libm's fmaf).
struct SoftmaxState {
  float max_score = -INFINITY, sum = 0.0f;
};
[[gnu::noinline, maybe_unused]] static void softmax_block(SoftmaxState& st, const float* scores, int64_t n,
                                                          bool* rescaled, float* rescales, float* weights) {
  for (int64_t j = 0; j < n; ++j) {
    const float s = scores[j];
    float ms = 1.0f, vs = 1.0f;
    rescaled[j] = s > st.max_score;
    if (rescaled[j]) {
      ms = std::exp(st.max_score - s);
      st.max_score = s;
    } else {
      vs = std::exp(s - st.max_score);
    }
    rescales[j] = ms;
    weights[j] = vs;
    st.sum = std::fma(st.sum, ms, vs);  // S = S*ms + vs, contracted to an FMA in llama.cpp's -march=native build
  }
}

template <typename Steps>
void attend(Steps& steps, const int64_t* n_pos, float scale, float* inv) {
  // Positions go in blocks: a block's scores, then each query's softmax chain over them (its exps depend only on
  // the scores), then the accumulator updates in position order, interleaved with the next block's scores so
  // that the independent dot products fill the waits of the accumulator chains.
  constexpr int kQ = Steps::kQueries;
  float scores[kQ * kScoreStride];  // query qi, block b, position j: [qi * kScoreStride + b * kAttendBlock + j]
  float rescales[kQ][kAttendBlock], weights[kQ][kAttendBlock];
  bool rescaled[kQ][kAttendBlock];
  SoftmaxState st[kQ];
  int64_t max_pos = 0;
  for (int qi = 0; qi < kQ; ++qi) max_pos = n_pos[qi] > max_pos ? n_pos[qi] : max_pos;
  auto score = [&](int64_t pos, float* s) {  // s: position pos of query 0
    steps.score(pos, s);
    for (int qi = 0; qi < kQ; ++qi) s[qi * kScoreStride] *= scale;
  };
  for (int64_t j = 0; j < max_pos && j < kAttendBlock; ++j) score(j, scores + j);
  for (int64_t p0 = 0, block = 0; p0 < max_pos; p0 += kAttendBlock, block ^= 1) {
    const int64_t nb = max_pos - p0 < kAttendBlock ? max_pos - p0 : kAttendBlock;
    const int64_t next = p0 + kAttendBlock, nn = max_pos - next < kAttendBlock ? max_pos - next : kAttendBlock;
    int64_t n_query[kQ];  // positions of this block that query qi attends to
    for (int qi = 0; qi < kQ; ++qi) {
      const int64_t left = n_pos[qi] - p0;
      n_query[qi] = left < 0 ? 0 : left < nb ? left : nb;
      softmax_block(st[qi], scores + qi * kScoreStride + block * kAttendBlock, n_query[qi], rescaled[qi], rescales[qi],
                    weights[qi]);
    }
    float* next_scores = scores + (block ^ 1) * kAttendBlock;
    for (int64_t j = 0; j < nb; ++j) {
      if (j < nn) score(next + j, next_scores + j);  // positions a query does not attend to are scored, unused
      for (int qi = 0; qi < kQ; ++qi) {
        if (j >= n_query[qi]) continue;
        if (rescaled[qi][j]) steps.rescale(qi, rescales[qi][j]);
        steps.accumulate(qi, p0 + j, weights[qi][j]);
      }
    }
  }
  for (int qi = 0; qi < kQ; ++qi) inv[qi] = st[qi].sum == 0.0f ? 0.0f : 1.0f / st[qi].sum;
}

// Up to kAttendMaxQueries queries of one KV head over an F16 cache, llama.cpp's VKQ16 path: query qi (d halves at
// q[qi]) attends to positions [0, n_pos[qi]) of K and V rows `stride` bytes apart starting at k and v; acc is
// d halves of scratch; out[qi] = acc_qi / S_qi as floats. Each query's result is that of a call with it alone.
constexpr int kAttendMaxQueries = 4;
#define TT_ATTEND_F16_DECL(name)                                                                               \
  void name(int n_queries, const uint16_t* const* q, const int64_t* n_pos, const uint8_t* k, const uint8_t* v, \
            uint64_t stride, int64_t d, float scale, uint16_t* acc, float* const* out)

// One query's steps over a cache of element type T from three primitives: dot(k_row, q), scale(acc, ms),
// mad(acc, v_row, vs). F16: dot_f16_double / scale_f16 / mad_f16 of one kernel set; F32: the float versions in
// graph/kernels.cpp.
template <typename T, float (*kDot)(const T*, const T*, int64_t), void (*kScale)(T*, float, int64_t),
          void (*kMad)(T*, const T*, float, int64_t)>
struct AttendSteps {
  static constexpr int kQueries = 1;
  const T* q;
  const uint8_t *k, *v;  // position 0 of this head's K and V rows, `stride` bytes apart
  uint64_t stride;
  int64_t d;
  T* acc;
  void score(int64_t pos, float* s) const { *s = kDot(reinterpret_cast<const T*>(k + pos * stride), q, d); }
  void rescale(int, float ms) { kScale(acc, ms, d); }
  void accumulate(int, int64_t pos, float vs) { kMad(acc, reinterpret_cast<const T*>(v + pos * stride), vs, d); }
};

}  // namespace tt
