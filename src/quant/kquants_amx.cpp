// AMX-INT8 tile kernel of Q4_K x Q8_K in the order of the Q4_K gemm (ref::repack_gemm_q4_k, the batched prompt
// path of the reference records): bit-identical to the AVX-512 tile, so "auto" takes it where the CPU has AMX.
// Per super-block and 16 weight rows, the rows' nibbles are transposed to B tiles (one per 32-element sub-block);
// TDPBSSD against 16 tokens' activations (A, read in place) gives every sub-block's exact int32 dot. The integer
// steps (x 6-bit scale, pair sums, mins x bsums) stay exact in int32, then enter the reference's FMAs: one per
// pair of sub-blocks into acc, one into acc_min, per (row, token) in lane order.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns about _mm512_undefined_* inside its own intrinsic headers (a known false positive; simd_x86.h).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "quant/amx_x86.h"
#include "quant/blocks.h"
#include "quant/kernels.h"

namespace tt::amx {
namespace {

constexpr int kSub = 8;       // 32-element sub-blocks of a super-block
constexpr int kQsOffset = 4;  // BlockQ8_K::qs, after the float d
// Tokens whose accumulators stay on the stack while a super-block's transposed rows serve them (mul_mat's token
// tiles are this size, so each super-block is transposed once a call).
constexpr int kTokenBlock = 64;
static_assert(offsetof(BlockQ8_K, qs) == kQsOffset);
// Tile registers: tmm0 / tmm1 the int32 sums C of a pair's low / high sub-block, tmm2 / tmm3 their tokens A,
// tmm4 / tmm5 their weights B (GCC's tile intrinsics take the register number as a literal).

void load_config() {
  TileConfig c;
  for (int s : {0, 1}) {
    c.rows[s] = kTile, c.colsb[s] = kTile * 4;            // C: int32 sums, tokens x weight rows
    c.rows[2 + s] = kTile, c.colsb[2 + s] = 32;           // A: tokens x one sub-block's quants
    c.rows[4 + s] = kGroups, c.colsb[4 + s] = kTile * 4;  // B: 4-byte groups x weight rows
  }
  _tile_loadconfig(&c);
}

// One super-block of rows [0, nr) (nr <= 16), lane r = row r (zero beyond nr).
struct Rows16 {
  alignas(64) uint8_t bt[kSub][kGroups][64];  // B tiles: bt[j][k][4r + i] = element 4k + i of sub-block j, row r
  __m512i sc[kSub], mn[kSub];                 // 6-bit scales and mins per sub-block
  __m512 d, dmin;

  Rows16(const uint8_t* b0, uint64_t x_row, int64_t nr) {
    const __m512i offsets = row_offsets(x_row);
    const __mmask16 valid = first_lanes(nr);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (int g = 0; g < kSub / 2; ++g)  // qs[32g..32g+31]: sub-block 2g in the low nibbles, 2g+1 in the high
      for (int k = 0; k < kGroups; ++k) {
        const __m512i q = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, offsets,
                                                      b0 + offsetof(BlockQ4_K, qs) + 32 * g + 4 * k, 1);
        _mm512_store_si512(bt[2 * g][k], _mm512_and_si512(q, low4));
        _mm512_store_si512(bt[2 * g + 1][k], _mm512_and_si512(_mm512_srli_epi16(q, 4), low4));
      }
    alignas(64) int32_t s[kSub][kTile] = {}, m[kSub][kTile] = {};
    for (int64_t r = 0; r < nr; ++r)
      for (int j = 0; j < kSub; ++j) {
        uint8_t sj, mj;
        get_scale_min_k4(j, reinterpret_cast<const BlockQ4_K*>(b0 + r * x_row)->scales, &sj, &mj);
        s[j][r] = sj, m[j][r] = mj;
      }
    for (int j = 0; j < kSub; ++j) sc[j] = _mm512_load_si512(s[j]), mn[j] = _mm512_load_si512(m[j]);
    d = gather_halves(b0 + offsetof(BlockQ4_K, d), offsets, nr);
    dmin = gather_halves(b0 + offsetof(BlockQ4_K, dmin), offsets, nr);
  }
};

// acc / acc_min of tokens [0, nt) (nt <= 16; 16 floats each, lane r = row r) += their super-block `i` against the
// rows (y: the group's first token).
void token_group(int64_t nt, const Rows16& w, const uint8_t* y, uint64_t y_row, int64_t i, float* acc_out,
                 float* acc_min_out) {
  const uint8_t* blocks = y + i * sizeof(BlockQ8_K);
  // A tiles: the tokens' quants in place, or for a short group a copy with zero rows beyond its tokens.
  alignas(64) int8_t padded[kTile][kQK_K];
  const uint8_t* a = blocks + kQsOffset;
  uint64_t a_stride = y_row;
  if (nt < kTile) {
    std::memset(padded, 0, sizeof(padded));
    for (int64_t t = 0; t < nt; ++t) std::memcpy(padded[t], a + t * y_row, kQK_K);
    a = reinterpret_cast<const uint8_t*>(padded), a_stride = kQK_K;
  }
  __m512 d[kTile], dmin[kTile], acc[kTile], acc_min[kTile];
  for (int64_t t = 0; t < nt; ++t) {
    acc[t] = _mm512_loadu_ps(acc_out + t * kTile);
    acc_min[t] = _mm512_loadu_ps(acc_min_out + t * kTile);  // as the reference: h2f(x.d) * y.d
    const __m512 yd = _mm512_set1_ps(reinterpret_cast<const BlockQ8_K*>(blocks + t * y_row)->d);
    d[t] = _mm512_mul_ps(w.d, yd);
    dmin[t] = _mm512_mul_ps(w.dmin, yd);
  }
  alignas(64) int32_t lo[kTile][kTile], hi[kTile][kTile];
  for (int g = 0; g < kSub / 2; ++g) {
    _tile_loadd(2, a + 64 * g, a_stride);
    _tile_loadd(4, w.bt[2 * g], 64);
    _tile_zero(0);
    _tile_dpbssd(0, 2, 4);
    _tile_loadd(3, a + 64 * g + 32, a_stride);
    _tile_loadd(5, w.bt[2 * g + 1], 64);
    _tile_zero(1);
    _tile_dpbssd(1, 3, 5);
    _tile_stored(0, lo, kTile * 4);
    _tile_stored(1, hi, kTile * 4);
    for (int64_t t = 0; t < nt; ++t) {
      const int16_t* bs = reinterpret_cast<const BlockQ8_K*>(blocks + t * y_row)->bsums + 4 * g;
      const __m512i isum = _mm512_add_epi32(_mm512_mullo_epi32(w.sc[2 * g], _mm512_load_si512(lo[t])),
                                            _mm512_mullo_epi32(w.sc[2 * g + 1], _mm512_load_si512(hi[t])));
      const __m512i imin = _mm512_add_epi32(_mm512_mullo_epi32(w.mn[2 * g], _mm512_set1_epi32(bs[0] + bs[1])),
                                            _mm512_mullo_epi32(w.mn[2 * g + 1], _mm512_set1_epi32(bs[2] + bs[3])));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d[t], acc[t]);
      acc_min[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imin), dmin[t], acc_min[t]);
    }
  }
  for (int64_t t = 0; t < nt; ++t) {
    _mm512_storeu_ps(acc_out + t * kTile, acc[t]);
    _mm512_storeu_ps(acc_min_out + t * kTile, acc_min[t]);
  }
}

}  // namespace

TT_TILE_DECL(tile_repack_gemm_q4_k) {
  const uint8_t* xb = static_cast<const uint8_t*>(x);
  const uint8_t* yb = static_cast<const uint8_t*>(y);
  load_config();
  // Per token of the block, acc and acc_min of the current 16 rows.
  alignas(64) float acc[kTokenBlock][kTile], acc_min[kTokenBlock][kTile];
  for (int64_t r0 = 0; r0 < nr; r0 += kTile) {
    const int64_t rows = std::min<int64_t>(kTile, nr - r0);
    for (int64_t t0 = 0; t0 < nt; t0 += kTokenBlock) {
      const int64_t tokens = std::min<int64_t>(kTokenBlock, nt - t0);
      std::fill(&acc[0][0], &acc[0][0] + kTokenBlock * kTile, 0.0f);
      std::fill(&acc_min[0][0], &acc_min[0][0] + kTokenBlock * kTile, 0.0f);
      for (int64_t i = 0; i < n / kQK_K; ++i) {
        const Rows16 w(xb + r0 * x_row + i * sizeof(BlockQ4_K), x_row, rows);
        for (int64_t g0 = 0; g0 < tokens; g0 += kTile)
          token_group(std::min<int64_t>(kTile, tokens - g0), w, yb + (t0 + g0) * y_row, y_row, i, acc[g0], acc_min[g0]);
      }
      for (int64_t t = 0; t < tokens; ++t)
        _mm512_mask_storeu_ps(out + (t0 + t) * ldo + r0, first_lanes(rows),
                              _mm512_sub_ps(_mm512_load_ps(acc[t]), _mm512_load_ps(acc_min[t])));
    }
  }
}

}  // namespace tt::amx
