// The online-softmax loop of ggml's flash-attention CPU kernel: for each query (token, head), one pass over the
// cache positions, never materialising the score matrix. A call serves Steps::kQueries queries that read the same
// K and V rows (the heads of one GQA group, or neighbouring tokens of one head), each with its own number of
// positions; `Steps` supplies the per-position work on its cache type:
//   void score(pos, float* s)              s[qi * kScoreStride] = K[pos] . Q_qi (unscaled), for every query
//   void rescale(int qi, float ms)         acc_qi *= ms
//   void accumulate(int qi, pos, float vs) acc_qi += V[pos] * vs
//   void softmax(st, scores, n_query, sb)  each query's softmax chain over a block (softmax_queries, or the same
//                                          floats computed otherwise)
// state[qi]: the query's running maximum and softmax sum S at the end; the caller scales acc_qi by 1/S (0 when S is
// 0, as ggml does: SoftmaxState::inverse), or keeps both as a partial result (llama.cpp's split of the cache).
// Written once and instantiated by the scalar reference, the SIMD kernels and the F32-cache path, so the order of
// every float step (and the libm expf llama.cpp calls) is the same in all of them, and each query's steps are
// those of a call with that query alone.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tt {

constexpr int64_t kAttendBlock = 32;                // positions per block
constexpr int64_t kScoreStride = 2 * kAttendBlock;  // between queries in a score buffer (two blocks)

struct SoftmaxState {
  float max_score = -INFINITY, sum = 0.0f;
  float inverse() const { return sum == 0.0f ? 0.0f : 1.0f / sum; }  // what the accumulator is scaled by
};

// The most queries one call serves (TT_ATTEND_F16_DECL below).
constexpr int kAttendMaxQueries = 4;

// One block's softmax steps for up to kAttendMaxQueries queries, position-major: at position j, query qi's
// accumulator is rescaled by rescales[j][qi] where bit qi of rescaled[j] says the running maximum moved, then takes
// V[j] times weights[j][qi].
struct SoftmaxBlock {
  float rescales[kAttendBlock][kAttendMaxQueries], weights[kAttendBlock][kAttendMaxQueries];
  unsigned rescaled[kAttendBlock];
};

// The softmax chain over one block of query qi's scores. Kept out of line: its libm calls would otherwise make the
// caller spill its register-resident accumulators at every position. Static: each kernel file keeps its own copy,
// built with its instruction set (one shared copy from a baseline file would call libm's fmaf).
[[gnu::noinline, maybe_unused]] static void softmax_block(SoftmaxState& st, const float* scores, int64_t n, int qi,
                                                          SoftmaxBlock& out) {
  for (int64_t j = 0; j < n; ++j) {
    const float s = scores[j];
    float ms = 1.0f, vs = 1.0f;
    if (s > st.max_score) {
      ms = std::exp(st.max_score - s);
      st.max_score = s;
      out.rescaled[j] |= 1u << qi;
    } else {
      vs = std::exp(s - st.max_score);
    }
    out.rescales[j][qi] = ms;
    out.weights[j][qi] = vs;
    st.sum = std::fma(st.sum, ms, vs);  // S = S*ms + vs, contracted to an FMA in llama.cpp's -march=native build
  }
}

// Every query's chain over a block, one query after another (scores of query qi at scores + qi * kScoreStride, its
// n_query[qi] positions): the steps' default softmax.
template <int kQ>
void softmax_queries(SoftmaxState* st, const float* scores, const int64_t* n_query, SoftmaxBlock& out) {
  static_assert(kQ <= kAttendMaxQueries);
  std::fill(out.rescaled, out.rescaled + kAttendBlock, 0u);
  for (int qi = 0; qi < kQ; ++qi) softmax_block(st[qi], scores + qi * kScoreStride, n_query[qi], qi, out);
}

// What query qi's accumulator is scaled by at the end: 1/S, or, when the caller keeps partial results, 1 (the
// state goes to partial[qi]).
inline float output_scale(const SoftmaxState& state, SoftmaxState* partial, int qi) {
  if (partial == nullptr) return state.inverse();
  partial[qi] = state;
  return 1.0f;
}

template <typename Steps>
void attend(Steps& steps, const int64_t* n_pos, float scale, SoftmaxState* state) {
  // Positions go in blocks: a block's scores, then each query's softmax chain over them (its exps depend only on
  // the scores), then the accumulator updates in position order, interleaved with the next block's scores so
  // that the independent dot products fill the waits of the accumulator chains.
  constexpr int kQ = Steps::kQueries;
  float scores[kQ * kScoreStride];  // query qi, block b, position j: [qi * kScoreStride + b * kAttendBlock + j]
  SoftmaxBlock sb;
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
    }
    steps.softmax(st, scores + block * kAttendBlock, n_query, sb);
    float* next_scores = scores + (block ^ 1) * kAttendBlock;
    for (int64_t j = 0; j < nb; ++j) {
      if (j < nn) score(next + j, next_scores + j);  // positions a query does not attend to are scored, unused
      for (int qi = 0; qi < kQ; ++qi) {
        if (j >= n_query[qi]) continue;
        if (sb.rescaled[j] >> qi & 1) steps.rescale(qi, sb.rescales[j][qi]);
        steps.accumulate(qi, p0 + j, sb.weights[j][qi]);
      }
    }
  }
  for (int qi = 0; qi < kQ; ++qi) state[qi] = st[qi];
}

// Up to kAttendMaxQueries queries of one KV head over an F16 cache, llama.cpp's VKQ16 path: query qi (d halves at
// q[qi]) attends to positions [0, n_pos[qi]) of K and V rows `stride` bytes apart starting at k and v; acc is
// d halves of scratch; out[qi] = acc_qi / S_qi as floats, or, with `partial`, out[qi] = acc_qi as floats and
// partial[qi] its softmax state (a chunk of llama.cpp's split cache). Each query's result is that of a call with it
// alone.
#define TT_ATTEND_F16_DECL(name)                                                                               \
  void name(int n_queries, const uint16_t* const* q, const int64_t* n_pos, const uint8_t* k, const uint8_t* v, \
            uint64_t stride, int64_t d, float scale, uint16_t* acc, float* const* out, SoftmaxState* partial)

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
  void softmax(SoftmaxState* st, const float* scores, const int64_t* n_query, SoftmaxBlock& out) const {
    softmax_queries<1>(st, scores, n_query, out);
  }
};

// ---- The tiled path: llama.cpp's ggml_compute_forward_flash_attn_ext_tiled, which its CPU backend runs instead
// of the loop above when a batch has at least kTileRows tokens and the head size is a multiple of its float vector
// (16 in the AVX-512 builds the engine reproduces). A tile is kTileRows queries against kTilePositions cache
// positions: the scores as a matrix product (each score one FMA chain over the head's elements, from 0, in
// element order), times the scale, masked to -inf; per query the tile's maximum, the accumulator and the sum
// rescaled by libm's expf when it moved, the tile's exps (ggml_vec_soft_max_f32: ggml_v_expf over 16-position
// chunks, each chunk's sum by _mm512_reduce_add_ps's tree, the chunks summed in double and added to the float sum);
// then accumulator += exps x V, each element one FMA chain over the positions in order, in floats. Q and V are
// used as floats (Q is not rounded to the cache type here), and the output is acc / S.
//
// Every query's result depends on its own row and the cache alone (zero weights add nothing to a chain that
// starts at +0), so queries may be grouped into calls at will. `Tile` supplies the arithmetic on its instruction
// set; the bookkeeping below is the same for the scalar reference and the SIMD kernels:
//   void pack(p0, n)                   K (transposed) and V of positions [p0, p0 + n) as floats
//   void scores(n_rows, n, float* kq)  kq[r * kTilePositions + j] = K[p0 + j] . Q_r for j < n (as above)
//   float scale_max(row, n, scale)     row[j] *= scale for j < n; their maximum
//   double softmax(row, max, n)        row[j] = exp(row[j] - max) over the 16-position chunks that hold [0, n);
//                                      the chunks' sums in double
//   void rescale(r, ms)                acc_r *= ms
//   void accumulate(n_rows, n, kq)     acc_r += sum over j < n of kq[r][j] * V[p0 + j]
//   void finish(r, inv)                out_r = acc_r * inv
constexpr int64_t kTileRows = 64, kTilePositions = 64;  // GGML_FA_TILE_Q, GGML_FA_TILE_KV
constexpr int64_t kTiledHeadMultiple = 16;
inline bool attention_is_tiled(int64_t n_tokens, int64_t head_dim) {
  return n_tokens >= kTileRows && head_dim % kTiledHeadMultiple == 0;
}

// One call: up to kTileRows queries that read the same K and V rows (`stride` bytes apart from position 0 at k
// and v, F16 or F32), query r at q[r] (d floats) attending to positions [0, n_pos[r]), its result to out[r].
struct AttendTiledArgs {
  int n_rows;
  const float* const* q;
  const int64_t* n_pos;
  const uint8_t *k, *v;
  uint64_t stride;
  bool f16;
  int64_t d;
  float scale;
  float* scratch;  // attend_tiled_scratch_floats(d), 64-byte aligned
  float* const* out;
};
#define TT_ATTEND_TILED_DECL(name) void name(const AttendTiledArgs& a)

// The call's work memory (AttendTiledArgs::scratch), the same for every Tile: K transposed [d][kTilePositions],
// V [kTilePositions][d], scores [kTileRows][kTilePositions], accumulators [kTileRows][d] (zeroed here), and room
// for the queries [kTileRows][d].
struct TiledScratch {
  float *kt, *v, *kq, *acc, *q;
  explicit TiledScratch(const AttendTiledArgs& a)
      : kt(a.scratch),
        v(kt + a.d * kTilePositions),
        kq(v + kTilePositions * a.d),
        acc(kq + kTileRows * kTilePositions),
        q(acc + kTileRows * a.d) {
    std::fill(acc, acc + a.n_rows * a.d, 0.0f);
  }
};
constexpr int64_t attend_tiled_scratch_floats(int64_t d) {
  return 2 * d * kTilePositions + kTileRows * kTilePositions + 2 * kTileRows * d;
}

template <typename Tile>
void attend_in_tiles(Tile& tile, const AttendTiledArgs& a, float* kq) {
  SoftmaxState st[kTileRows];
  int64_t max_pos = 0;
  for (int r = 0; r < a.n_rows; ++r) max_pos = std::max(max_pos, a.n_pos[r]);
  for (int64_t p0 = 0; p0 < max_pos; p0 += kTilePositions) {
    const int64_t n = std::min(kTilePositions, max_pos - p0);
    tile.pack(p0, n);
    tile.scores(a.n_rows, n, kq);
    for (int r = 0; r < a.n_rows; ++r) {
      float* row = kq + r * kTilePositions;
      const int64_t valid = std::clamp<int64_t>(a.n_pos[r] - p0, 0, n);
      if (valid == 0) {  // every position masked: the query skips the tile (its weights are zeros)
        std::fill(row, row + n, 0.0f);
        continue;
      }
      const float tile_max = tile.scale_max(row, valid, a.scale);
      std::fill(row + valid, row + kTilePositions, -INFINITY);
      const float m = std::max(st[r].max_score, tile_max);
      if (m > st[r].max_score) {
        const float ms = std::exp(st[r].max_score - m);
        tile.rescale(r, ms);
        st[r].sum *= ms;
      }
      st[r].max_score = m;
      st[r].sum = static_cast<float>(static_cast<double>(st[r].sum) + tile.softmax(row, m, n));
    }
    tile.accumulate(a.n_rows, n, kq);
  }
  for (int r = 0; r < a.n_rows; ++r) tile.finish(r, st[r].inverse());
}

}  // namespace tt
