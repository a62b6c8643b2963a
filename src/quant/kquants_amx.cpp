// AMX-INT8 tile kernels of the K-quants x Q8_K, bit-identical to the AVX-512 kernels they stand in for, so "auto"
// takes them where the CPU has AMX. Both keep the AVX-512 order's float steps and compute the integers that enter
// them with TDPBSSD (exact int32 dots), per super-block of 16 weight rows (transposed to B tiles once) met by
// groups of 16 tokens (A tiles).
//   Q4_K (ref::repack_gemm_q4_k, the batched prompt path of the reference records): one B tile per 32-element
//     sub-block, the tokens' activations read in place; the integer steps (x 6-bit scale, pair sums, mins x bsums)
//     stay exact in int32, then enter the reference's FMAs: one per pair of sub-blocks into acc, one into acc_min.
//   Q5_K and Q6_K (vec_dot_q5_k, vec_dot_q6_k): ggml's 8 int32 lanes per super-block, lane L holding the products
//     of elements 32g + 4L .. 32g + 4L + 3 of every 32-element group g, each times its sub-block's scale (Q6_K:
//     less 32 x (bsums x scales) of sub-blocks 2L, 2L + 1). A tile per lane holds those 32 activations of 16 tokens
//     (a transpose of each Q8_K block's 4-byte groups); the B tiles hold the weights times their scale (int16)
//     split into a signed high and low byte, so lane = 256 * hi-dot + lo-dot exactly. Then the lane's FMA per
//     super-block (Q5_K: and its mins x bsums product) and ggml's horizontal sum of the 8 lanes.
//   Q2_K (ref::repack_gemm_q2_k, the batched prompt path): the 2-bit quants times their sub-block's 4-bit scale
//     (at most 45, an int8) in the B tiles, so the four TDPBSSD of a half super-block sum its exact scaled dot;
//     mins x bsums in int32; then the reference's two FMAs a half.
//   IQ4_XS (vec_dot_iq4_xs): the same lanes, its quants the non-linear levels (signed) times the 6-bit scale less 32.
// A lone token (generation) keeps the AVX-512 kernels: it would fill one row of the 16-token tiles.
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
#include "quant/quant.h"
#include "quant/row_groups_x86.h"

namespace tt::amx {
namespace {

constexpr int kSub = 8;       // 32-element sub-blocks of a super-block (Q4_K); groups of 32 elements (Q6_K)
constexpr int kLanes = 8;     // ggml's int32 lanes of a Q6_K super-block
constexpr int kQsOffset = 4;  // BlockQ8_K::qs, after the float d
// Tokens whose accumulators stay on the stack while a super-block's transposed rows serve them (mul_mat's token
// tiles are this size, so each super-block is transposed once a call).
constexpr int kTokenBlock = 64;
static_assert(offsetof(BlockQ8_K, qs) == kQsOffset);
// Tile registers: tmm0 / tmm1 int32 sums C, tmm2 / tmm3 tokens A, tmm4 / tmm5 weights B (GCC's tile intrinsics
// take the register number as a literal). Q4_K: a pair of sub-blocks, low in 0 / 2 / 4, high in 1 / 3 / 5. Q5_K and
// Q6_K: a pair of lanes, their tokens in 2 / 3, a lane's high and low weight bytes in 4 / 5, the sums of the first
// lane in 0 / 1, of the second in 6 / 7.

void load_config() {
  TileConfig c;
  for (int s : {0, 1}) {
    c.rows[s] = kTile, c.colsb[s] = kTile * 4;            // C: int32 sums, tokens x weight rows
    c.rows[2 + s] = kTile, c.colsb[2 + s] = 32;           // A: tokens x 32 quants
    c.rows[4 + s] = kGroups, c.colsb[4 + s] = kTile * 4;  // B: 4-byte groups x weight rows
    c.rows[6 + s] = kTile, c.colsb[6 + s] = kTile * 4;    // C (Q5_K, Q6_K: a second lane's)
  }
  load_tile_config(c);
}

// The 6-bit scales and mins (get_scale_min_k4: Q4_K's and Q5_K's layout) of one super-block of rows [0, nr), rows
// x_row bytes apart from b0: s[j][r], m[j][r] for sub-block j; 0 for the rows past nr.
template <typename Block>
void scales_mins_k4(const uint8_t* b0, uint64_t x_row, int64_t nr, int32_t (&s)[kSub][kTile],
                    int32_t (&m)[kSub][kTile]) {
  for (int j = 0; j < kSub; ++j)
    for (int64_t r = 0; r < kTile; ++r) {
      uint8_t sj = 0, mj = 0;
      if (r < nr) get_scale_min_k4(j, reinterpret_cast<const Block*>(b0 + r * x_row)->scales, &sj, &mj);
      s[j][r] = sj, m[j][r] = mj;
    }
}

// The A tiles of a group of nt (<= 16) tokens' Q8_K quants of one super-block (blocks: the first token's): read in
// place, or for a short group a copy with zero rows beyond its tokens.
struct TokenQuants {
  alignas(64) int8_t padded[kTile][kQK_K];
  const uint8_t* a;
  uint64_t stride;
  TokenQuants(const uint8_t* blocks, uint64_t y_row, int64_t nt) : a(blocks + kQsOffset), stride(y_row) {
    if (nt == kTile) return;
    std::memset(padded, 0, sizeof(padded));
    for (int64_t t = 0; t < nt; ++t) std::memcpy(padded[t], a + t * y_row, kQK_K);
    a = reinterpret_cast<const uint8_t*>(padded), stride = kQK_K;
  }
  TokenQuants(const TokenQuants&) = delete;
  TokenQuants& operator=(const TokenQuants&) = delete;
};

// One Q4_K super-block of rows [0, nr) (nr <= 16), lane r = row r (zero beyond nr).
struct Q4KRows16 {
  static constexpr int kAcc = 2;  // per token: acc, acc_min
  static constexpr uint64_t kBlockBytes = sizeof(BlockQ4_K);
  alignas(64) uint8_t bt[kSub][kGroups][64];  // B tiles: bt[j][k][4r + i] = element 4k + i of sub-block j, row r
  __m512i sc[kSub], mn[kSub];                 // 6-bit scales and mins per sub-block
  __m512 d, dmin;

  Q4KRows16(const uint8_t* b0, uint64_t x_row, int64_t nr) {
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
    alignas(64) int32_t s[kSub][kTile], m[kSub][kTile];
    scales_mins_k4<BlockQ4_K>(b0, x_row, nr, s, m);
    for (int j = 0; j < kSub; ++j) sc[j] = _mm512_load_si512(s[j]), mn[j] = _mm512_load_si512(m[j]);
    d = gather_halves(b0 + offsetof(BlockQ4_K, d), offsets, nr);
    dmin = gather_halves(b0 + offsetof(BlockQ4_K, dmin), offsets, nr);
  }

  // The same from a super-block of 16 rows stored in a group (RowGroups): its quant parts are the B tiles' rows
  // already, its scale parts hold the 16 rows' bytes side by side.
  explicit Q4KRows16(const uint8_t* sb) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (int g = 0; g < kSub / 2; ++g)
      for (int k = 0; k < kGroups; ++k) {
        const __m512i q = _mm512_loadu_si512(sb + Q4KGroup::kQuants + 64 * (kGroups * g + k));
        _mm512_store_si512(bt[2 * g][k], _mm512_and_si512(q, low4));
        _mm512_store_si512(bt[2 * g + 1][k], _mm512_and_si512(_mm512_srli_epi16(q, 4), low4));
      }
    const K4ScalesLanes k4(sb);
    for (int j = 0; j < kSub; ++j) sc[j] = k4.scale(j), mn[j] = k4.min(j);
    d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + Q4KGroup::kD)));
    dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + Q4KGroup::kDmin)));
  }

  // acc[t] (acc, acc_min) of tokens [0, nt) (nt <= 16) += their super-block `i` against the rows (y: the group's
  // first token).
  void token_group(int64_t nt, const uint8_t* y, uint64_t y_row, int64_t i, float (*acc_io)[kAcc][kTile]) const {
    const uint8_t* blocks = y + i * sizeof(BlockQ8_K);
    const TokenQuants quants(blocks, y_row, nt);
    const uint8_t* a = quants.a;
    const uint64_t a_stride = quants.stride;
    __m512 dt[kTile], dmint[kTile], acc[kTile], acc_min[kTile];
    for (int64_t t = 0; t < nt; ++t) {
      acc[t] = _mm512_load_ps(acc_io[t][0]);
      acc_min[t] = _mm512_load_ps(acc_io[t][1]);  // as the reference: h2f(x.d) * y.d
      const __m512 yd = _mm512_set1_ps(reinterpret_cast<const BlockQ8_K*>(blocks + t * y_row)->d);
      dt[t] = _mm512_mul_ps(d, yd);
      dmint[t] = _mm512_mul_ps(dmin, yd);
    }
    alignas(64) int32_t lo[kTile][kTile], hi[kTile][kTile];
    for (int g = 0; g < kSub / 2; ++g) {
      _tile_loadd(2, a + 64 * g, a_stride);
      _tile_loadd(4, bt[2 * g], 64);
      _tile_zero(0);
      _tile_dpbssd(0, 2, 4);
      _tile_loadd(3, a + 64 * g + 32, a_stride);
      _tile_loadd(5, bt[2 * g + 1], 64);
      _tile_zero(1);
      _tile_dpbssd(1, 3, 5);
      _tile_stored(0, lo, kTile * 4);
      _tile_stored(1, hi, kTile * 4);
      for (int64_t t = 0; t < nt; ++t) {
        const int16_t* bs = reinterpret_cast<const BlockQ8_K*>(blocks + t * y_row)->bsums + 4 * g;
        const __m512i isum = _mm512_add_epi32(_mm512_mullo_epi32(sc[2 * g], _mm512_load_si512(lo[t])),
                                              _mm512_mullo_epi32(sc[2 * g + 1], _mm512_load_si512(hi[t])));
        const __m512i imin = _mm512_add_epi32(_mm512_mullo_epi32(mn[2 * g], _mm512_set1_epi32(bs[0] + bs[1])),
                                              _mm512_mullo_epi32(mn[2 * g + 1], _mm512_set1_epi32(bs[2] + bs[3])));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), dt[t], acc[t]);
        acc_min[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imin), dmint[t], acc_min[t]);
      }
    }
    for (int64_t t = 0; t < nt; ++t) {
      _mm512_store_ps(acc_io[t][0], acc[t]);
      _mm512_store_ps(acc_io[t][1], acc_min[t]);
    }
  }

  static __m512 finish(const float (&acc)[kAcc][kTile]) {
    return _mm512_sub_ps(_mm512_load_ps(acc[0]), _mm512_load_ps(acc[1]));
  }
};

// Permutation indices of the 8 x 8 dword transpose of a Q8_K block's quants (group g, lane L) -> (lane L, group g),
// in two steps of two-register permutes (Q6KRows16::token_group).
struct LaneTranspose {
  // Step 1, from the dwords of groups 0..3 (or 4..7): dword i of half mm = lane 4mm + i / 4 of group i % 4.
  alignas(64) int32_t step1[2][16];
  // Step 2, from step 1's halves of groups 0..3 and 4..7: dword i = group i % 8 of lane 2m + i / 8, for m % 2 = k.
  alignas(64) int32_t step2[2][16];
};
constexpr LaneTranspose make_lane_transpose() {
  LaneTranspose p{};
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 16; ++i) {
      p.step1[h][i] = 8 * (i % 4) + 4 * h + i / 4;
      const int lane = 2 * h + i / 8, g = i % 8;  // lane within step 1's half
      p.step2[h][i] = g < 4 ? 4 * lane + g : 16 + 4 * lane + g - 4;
    }
  return p;
}
constexpr LaneTranspose kLaneTranspose = make_lane_transpose();

// The B tiles of ggml's 8 int32 lanes of a K-quant super-block (vec_dot_q5_k, vec_dot_q6_k): lane L holds the
// products of elements 32g + 4L .. 32g + 4L + 3 of every 32-element group g, each times its sub-block's scale. Per
// lane, B tiles of 16 rows hold quant x scale (int16) as a signed high and low byte, so TDPBSSD against the lane's
// activations (A) gives the lane as 256 * hi-dot + lo-dot exactly.
struct LaneTiles {
  alignas(64) int8_t hi[kLanes][kGroups][64], lo[kLanes][kGroups][64];  // [L][g][4r + i]: element 32g + 4L + i

  // Stores the 4 bytes of lane l, group g of 16 rows (q: quants, 0..63) times scale16 (per row, int16 twice).
  void store(int l, int g, __m512i q, __m512i scale16) {
    const __m512i even = _mm512_set1_epi16(0x00FF);
    store_products(l, g, _mm512_mullo_epi16(_mm512_and_si512(q, even), scale16),
                   _mm512_mullo_epi16(_mm512_srli_epi16(q, 8), scale16));
  }
  // The same for signed quants (int8).
  void store_signed(int l, int g, __m512i q, __m512i scale16) {
    store_products(l, g, _mm512_mullo_epi16(_mm512_srai_epi16(_mm512_slli_epi16(q, 8), 8), scale16),
                   _mm512_mullo_epi16(_mm512_srai_epi16(q, 8), scale16));
  }
  // we / wo: the products of the even / odd bytes, as int16 (|w| < 2^15 - 128).
  void store_products(int l, int g, __m512i we, __m512i wo) {
    const __m512i even = _mm512_set1_epi16(0x00FF), round = _mm512_set1_epi16(128);
    // w = 256 * hi + lo: lo its low byte (signed), hi = (w + 128) >> 8 (|hi| <= 32).
    _mm512_store_si512(lo[l][g], _mm512_or_si512(_mm512_and_si512(we, even), _mm512_slli_epi16(wo, 8)));
    _mm512_store_si512(hi[l][g],
                       _mm512_or_si512(_mm512_and_si512(_mm512_srai_epi16(_mm512_add_epi16(we, round), 8), even),
                                       _mm512_slli_epi16(_mm512_srai_epi16(_mm512_add_epi16(wo, round), 8), 8)));
  }

  // each(l, t, lane) for every lane l and token t < nt (nt <= 16) of super-block blocks (the group's first token's):
  // the lane's int32 sums, lane r = row r.
  template <typename Each>
  void lanes(int64_t nt, const uint8_t* blocks, uint64_t y_row, Each each) const {
    // A tiles: at[m][t] = token t's quants of lane 2m (bytes 0..31, group by group) and 2m + 1 (32..63); zero
    // rows beyond nt.
    alignas(64) int8_t at[kLanes / 2][kTile][64];
    if (nt < kTile) std::memset(at, 0, sizeof(at));
    const __m512i s1[2] = {_mm512_load_si512(kLaneTranspose.step1[0]), _mm512_load_si512(kLaneTranspose.step1[1])};
    const __m512i s2[2] = {_mm512_load_si512(kLaneTranspose.step2[0]), _mm512_load_si512(kLaneTranspose.step2[1])};
    for (int64_t t = 0; t < nt; ++t) {
      const uint8_t* qs = blocks + t * y_row + kQsOffset;
      __m512i v[4];  // v[p]: groups 2p, 2p + 1
      for (int p = 0; p < 4; ++p) v[p] = _mm512_loadu_si512(qs + 64 * p);
      for (int h = 0; h < 2; ++h) {
        const __m512i g03 = _mm512_permutex2var_epi32(v[0], s1[h], v[1]);
        const __m512i g47 = _mm512_permutex2var_epi32(v[2], s1[h], v[3]);
        for (int k = 0; k < 2; ++k) _mm512_store_si512(at[2 * h + k][t], _mm512_permutex2var_epi32(g03, s2[k], g47));
      }
    }
    // Two lanes at a time (C in 0 / 1 and 6 / 7), so the tile unit has four dots queued before the stores.
    alignas(64) int32_t c[2][2][kTile][kTile];  // [lane of the pair][high, low][token][row]
    for (int l = 0; l < kLanes; l += 2) {
      _tile_loadd(2, at[l / 2][0], 64);
      _tile_loadd(4, hi[l], 64);
      _tile_loadd(5, lo[l], 64);
      _tile_zero(0);
      _tile_zero(1);
      _tile_dpbssd(0, 2, 4);
      _tile_dpbssd(1, 2, 5);
      _tile_loadd(3, at[l / 2][0] + 32, 64);
      _tile_loadd(4, hi[l + 1], 64);
      _tile_loadd(5, lo[l + 1], 64);
      _tile_zero(6);
      _tile_zero(7);
      _tile_dpbssd(6, 3, 4);
      _tile_dpbssd(7, 3, 5);
      _tile_stored(0, c[0][0], kTile * 4);
      _tile_stored(1, c[0][1], kTile * 4);
      _tile_stored(6, c[1][0], kTile * 4);
      _tile_stored(7, c[1][1], kTile * 4);
      for (int k = 0; k < 2; ++k)
        for (int64_t t = 0; t < nt; ++t)
          each(l + k, t,
               _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(c[k][0][t]), 8), _mm512_load_si512(c[k][1][t])));
    }
  }

  // hsum's order (simd_x86.h) of the 8 float lanes: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
  static __m512 hsum(const float (*acc)[kTile]) {
    const auto pair = [&](int a) { return _mm512_add_ps(_mm512_load_ps(acc[a]), _mm512_load_ps(acc[a + 4])); };
    return _mm512_add_ps(_mm512_add_ps(pair(0), pair(2)), _mm512_add_ps(pair(1), pair(3)));
  }
};

// Gathers of a dword at the same offset of 16 rows' super-blocks (zero beyond nr).
struct RowGather {
  const uint8_t* b0;
  __m512i offsets;
  __mmask16 valid;
  RowGather(const uint8_t* b, uint64_t x_row, int64_t nr)
      : b0(b), offsets(row_offsets(x_row)), valid(first_lanes(nr)) {}
  __m512i operator()(size_t offset) const {
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, offsets, b0 + offset, 1);
  }
};

// int16 pairs (a, b) from int32s.
inline __m512i pair16(__m512i a, __m512i b) {
  return _mm512_or_si512(_mm512_and_si512(a, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(b, 16));
}

// One Q2_K super-block of rows [0, nr) (nr <= 16), lane r = row r (zero beyond nr).
struct Q2KRows16 {
  static constexpr int kAcc = 2;  // per token: acc, acc_min
  static constexpr uint64_t kBlockBytes = sizeof(BlockQ2_K);
  // B tiles: bt[k][j][4r + i] = element 32k + 4j + i of row r times its 16-element sub-block's scale.
  alignas(64) int8_t bt[kSub][kGroups][64];
  __m512i mins[kSub];  // int16 pairs (min 2p, min 2p + 1) of sub-blocks 2p, 2p + 1, against bsums 2p, 2p + 1
  __m512 d, dmin;

  Q2KRows16(const uint8_t* b0, uint64_t x_row, int64_t nr) {
    const RowGather gather(b0, x_row, nr);
    __m512i sc[16], mn[16];  // per 16-element sub-block: its scale and min as int32
    for (int m = 0; m < 4; ++m) {
      const __m512i four = gather(offsetof(BlockQ2_K, scales) + 4 * m);
      for (int b = 0; b < 4; ++b) {
        const __m512i byte = _mm512_and_si512(_mm512_srli_epi32(four, 8 * b), _mm512_set1_epi32(0xFF));
        sc[4 * m + b] = _mm512_and_si512(byte, _mm512_set1_epi32(0xF));
        mn[4 * m + b] = _mm512_srli_epi32(byte, 4);
      }
    }
    for (int p = 0; p < 8; ++p) mins[p] = pair16(mn[2 * p], mn[2 * p + 1]);
    const __m512i three = _mm512_set1_epi8(3), even = _mm512_set1_epi16(0x00FF);
    for (int h = 0; h < 2; ++h)  // a half: qs[32h..32h+31], the 32 elements 32k.. of k = 4h + s at shift 2s
      for (int j = 0; j < kGroups; ++j) {
        const __m512i q = gather(offsetof(BlockQ2_K, qs) + 32 * h + 4 * j);
        for (int s = 0; s < 4; ++s) {
          const int k = 4 * h + s, g = 2 * k + j / 4;  // bytes 0-15 in sub-block 2k, 16-31 in 2k + 1
          const __m512i v = _mm512_and_si512(_mm512_srli_epi16(q, 2 * s), three);
          const __m512i scale16 = pair16(sc[g], sc[g]);
          const __m512i we = _mm512_mullo_epi16(_mm512_and_si512(v, even), scale16);
          const __m512i wo = _mm512_mullo_epi16(_mm512_srli_epi16(v, 8), scale16);
          _mm512_store_si512(bt[k][j], _mm512_or_si512(we, _mm512_slli_epi16(wo, 8)));
        }
      }
    // d and dmin end the 84-byte block: one dword from d holds both (one from dmin would read past the row).
    const __m512i dd = gather(offsetof(BlockQ2_K, d));
    d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
    dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
  }

  // acc[t] (acc, acc_min) of tokens [0, nt) (nt <= 16) += their super-block `i` against the rows (y: the group's
  // first token): per half, acc += isum * (h2f(x.d) * y.d), acc_min += imin * (h2f(x.dmin) * y.d).
  void token_group(int64_t nt, const uint8_t* y, uint64_t y_row, int64_t i, float (*acc_io)[kAcc][kTile]) const {
    const uint8_t* blocks = y + i * sizeof(BlockQ8_K);
    const TokenQuants quants(blocks, y_row, nt);
    const uint8_t* a = quants.a;
    const uint64_t a_stride = quants.stride;
    // Half 0 into tmm0 (A tmm2, B tmm4), half 1 into tmm1 (A tmm3, B tmm5).
    _tile_zero(0);
    _tile_zero(1);
    for (int s = 0; s < 4; ++s) {
      _tile_loadd(2, a + 32 * s, a_stride);
      _tile_loadd(4, bt[s], 64);
      _tile_dpbssd(0, 2, 4);
      _tile_loadd(3, a + 32 * (4 + s), a_stride);
      _tile_loadd(5, bt[4 + s], 64);
      _tile_dpbssd(1, 3, 5);
    }
    alignas(64) int32_t c[2][kTile][kTile];
    _tile_stored(0, c[0], kTile * 4);
    _tile_stored(1, c[1], kTile * 4);
    for (int64_t t = 0; t < nt; ++t) {
      const BlockQ8_K& b = *reinterpret_cast<const BlockQ8_K*>(blocks + t * y_row);
      const __m512 yd = _mm512_set1_ps(b.d), dt = _mm512_mul_ps(d, yd), dmint = _mm512_mul_ps(dmin, yd);
      __m512 acc = _mm512_load_ps(acc_io[t][0]), acc_min = _mm512_load_ps(acc_io[t][1]);
      for (int h = 0; h < 2; ++h) {
        __m512i imin = _mm512_setzero_si512();
        for (int p = 4 * h; p < 4 * h + 4; ++p) {
          int32_t bs;  // bsums 2p, 2p + 1 as one int16 pair
          std::memcpy(&bs, b.bsums + 2 * p, sizeof(bs));
          imin = _mm512_dpwssd_epi32(imin, mins[p], _mm512_set1_epi32(bs));
        }
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[h][t])), dt, acc);
        acc_min = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imin), dmint, acc_min);
      }
      _mm512_store_ps(acc_io[t][0], acc);
      _mm512_store_ps(acc_io[t][1], acc_min);
    }
  }

  static __m512 finish(const float (&acc)[kAcc][kTile]) {
    return _mm512_sub_ps(_mm512_load_ps(acc[0]), _mm512_load_ps(acc[1]));
  }
};

// One Q6_K super-block of rows [0, nr) (nr <= 16), lane r = row r (zero beyond nr), in vec_dot_q6_k's order:
// stored quants 0..63, and each lane less 32 x (bsums x scales) of sub-blocks 2L, 2L + 1.
struct Q6KRows16 : LaneTiles {
  static constexpr int kAcc = kLanes;  // per token: ggml's 8 float lanes
  static constexpr uint64_t kBlockBytes = sizeof(BlockQ6_K);
  __m512i bsum_scales[kLanes];  // lane L: int16 pairs -32 * (scale 2L, scale 2L + 1), against the bsums
  __m512 d;

  Q6KRows16(const uint8_t* b0, uint64_t x_row, int64_t nr) {
    const RowGather gather(b0, x_row, nr);
    __m512i sc[16];  // the 16 int8 scales as int32
    for (int m = 0; m < 4; ++m) {
      const __m512i four = gather(offsetof(BlockQ6_K, scales) + 4 * m);
      for (int b = 0; b < 4; ++b) sc[4 * m + b] = _mm512_srai_epi32(_mm512_slli_epi32(four, 24 - 8 * b), 24);
    }
    for (int l = 0; l < kLanes; ++l)
      bsum_scales[l] = pair16(_mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sc[2 * l], 5)),
                              _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sc[2 * l + 1], 5)));
    const __m512i low4 = _mm512_set1_epi8(0x0F), two = _mm512_set1_epi8(3);
    for (int h = 0; h < 2; ++h)  // halves of 128 elements: groups 4h .. 4h + 3
      for (int l = 0; l < kLanes; ++l) {
        // As Q6Weights512 (kquants_x86.inc), the 4 bytes of lane l of each group.
        const __m512i ql0 = gather(offsetof(BlockQ6_K, ql) + 64 * h + 4 * l);
        const __m512i ql1 = gather(offsetof(BlockQ6_K, ql) + 64 * h + 32 + 4 * l);
        const __m512i qh = gather(offsetof(BlockQ6_K, qh) + 32 * h + 4 * l);
        const __m512i q[4] = {
            _mm512_or_si512(_mm512_and_si512(ql0, low4), _mm512_slli_epi16(_mm512_and_si512(qh, two), 4)),
            _mm512_or_si512(_mm512_and_si512(ql1, low4),
                            _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 2), two), 4)),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql0, 4), low4),
                            _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 4), two), 4)),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql1, 4), low4),
                            _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 6), two), 4)),
        };
        for (int c = 0; c < 4; ++c) {
          const int g = 4 * h + c, s = 2 * g + l / 4;
          store(l, g, q[c], pair16(sc[s], sc[s]));
        }
      }
    // The half d ends the 210-byte block: gather the dword ending there (one from d would read past the row).
    const __m512i dw = gather(offsetof(BlockQ6_K, d) - 2);
    d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dw, 16)));
  }

  // acc[t] (8 lanes) of tokens [0, nt) (nt <= 16) += their super-block `i` against the rows (y: the group's first
  // token), one FMA per lane as vec_dot_q6_k.
  void token_group(int64_t nt, const uint8_t* y, uint64_t y_row, int64_t i, float (*acc)[kAcc][kTile]) const {
    const uint8_t* blocks = y + i * sizeof(BlockQ8_K);
    const auto block = [&](int64_t t) { return reinterpret_cast<const BlockQ8_K*>(blocks + t * y_row); };
    __m512 dt[kTile];
    for (int64_t t = 0; t < nt; ++t) dt[t] = _mm512_mul_ps(_mm512_set1_ps(block(t)->d), d);  // y.d * h2f(x.d)
    lanes(nt, blocks, y_row, [&](int l, int64_t t, __m512i sums) {
      int32_t bs;  // bsums 2l, 2l + 1 as one int16 pair
      std::memcpy(&bs, block(t)->bsums + 2 * l, sizeof(bs));
      const __m512i lane = _mm512_dpwssd_epi32(sums, bsum_scales[l], _mm512_set1_epi32(bs));
      _mm512_store_ps(acc[t][l], _mm512_fmadd_ps(dt[t], _mm512_cvtepi32_ps(lane), _mm512_load_ps(acc[t][l])));
    });
  }

  static __m512 finish(const float (&acc)[kAcc][kTile]) { return hsum(acc); }
};

// One Q5_K super-block of rows [0, nr) (nr <= 16), lane r = row r (zero beyond nr), in vec_dot_q5_k's order: the
// 8 lanes of quants 0..31 times their 6-bit scales, and apart the mins x bsums, one float product a super-block.
struct Q5KRows16 : LaneTiles {
  static constexpr int kAcc = kLanes + 1;  // per token: ggml's 8 float lanes, then min_sum
  static constexpr uint64_t kBlockBytes = sizeof(BlockQ5_K);
  __m512i mins[kSub];  // sub-block j: int16 pairs (min j, min j), against bsums 2j, 2j + 1
  __m512 d, dmin;

  Q5KRows16(const uint8_t* b0, uint64_t x_row, int64_t nr) {
    const RowGather gather(b0, x_row, nr);
    alignas(64) int32_t s[kSub][kTile], m[kSub][kTile];
    scales_mins_k4<BlockQ5_K>(b0, x_row, nr, s, m);
    __m512i sc16[kSub];
    for (int j = 0; j < kSub; ++j) {
      const __m512i sj = _mm512_load_si512(s[j]), mj = _mm512_load_si512(m[j]);
      sc16[j] = pair16(sj, sj), mins[j] = pair16(mj, mj);
    }
    const __m512i low4 = _mm512_set1_epi8(0x0F), one = _mm512_set1_epi8(1);
    for (int l = 0; l < kLanes; ++l) {
      const __m512i qh = gather(offsetof(BlockQ5_K, qh) + 4 * l);  // bit j: the fifth bit in sub-block j
      for (int p = 0; p < kSub / 2; ++p) {  // qs[32p..32p+31]: sub-block 2p in the low nibbles, 2p+1 in the high
        const __m512i q = gather(offsetof(BlockQ5_K, qs) + 32 * p + 4 * l);
        for (int k = 0; k < 2; ++k) {
          const int j = 2 * p + k;
          const __m512i nib = _mm512_and_si512(k ? _mm512_srli_epi16(q, 4) : q, low4);
          const __m512i bit = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, j), one), 4);
          store(l, j, _mm512_or_si512(nib, bit), sc16[j]);
        }
      }
    }
    d = gather_halves(b0 + offsetof(BlockQ5_K, d), gather.offsets, nr);
    dmin = gather_halves(b0 + offsetof(BlockQ5_K, dmin), gather.offsets, nr);
  }

  // acc[t] (8 lanes, min_sum) of tokens [0, nt) (nt <= 16) += their super-block `i` against the rows, as
  // vec_dot_q5_k: an FMA per lane by h2f(x.d) * y.d; min_sum += h2f(x.dmin) * y.d * (mins x bsums).
  void token_group(int64_t nt, const uint8_t* y, uint64_t y_row, int64_t i, float (*acc)[kAcc][kTile]) const {
    const uint8_t* blocks = y + i * sizeof(BlockQ8_K);
    const auto block = [&](int64_t t) { return reinterpret_cast<const BlockQ8_K*>(blocks + t * y_row); };
    __m512 dt[kTile];
    for (int64_t t = 0; t < nt; ++t) {
      const BlockQ8_K& b = *block(t);
      const __m512 yd = _mm512_set1_ps(b.d);
      dt[t] = _mm512_mul_ps(d, yd);
      __m512i isum_min = _mm512_setzero_si512();
      for (int j = 0; j < kSub; ++j) {
        int32_t bs;  // bsums 2j, 2j + 1 as one int16 pair
        std::memcpy(&bs, b.bsums + 2 * j, sizeof(bs));
        isum_min = _mm512_dpwssd_epi32(isum_min, mins[j], _mm512_set1_epi32(bs));
      }
      // An FMA, as GCC compiles vec_dot_q5_k's min_sum += (dmin * y.d) * isum_min (C++ contracts by default).
      _mm512_store_ps(acc[t][kLanes], _mm512_fmadd_ps(_mm512_mul_ps(dmin, yd), _mm512_cvtepi32_ps(isum_min),
                                                      _mm512_load_ps(acc[t][kLanes])));
    }
    lanes(nt, blocks, y_row, [&](int l, int64_t t, __m512i sums) {
      _mm512_store_ps(acc[t][l], _mm512_fmadd_ps(dt[t], _mm512_cvtepi32_ps(sums), _mm512_load_ps(acc[t][l])));
    });
  }

  static __m512 finish(const float (&acc)[kAcc][kTile]) {
    return _mm512_sub_ps(hsum(acc), _mm512_load_ps(acc[kLanes]));
  }
};

// One IQ4_XS super-block of rows [0, nr) (nr <= 16), lane r = row r (zero beyond nr), in vec_dot_iq4_xs's order:
// the 8 lanes of the levels times their sub-block's scale less 32, one FMA a super-block by h2f(x.d) * y.d.
struct IQ4XSRows16 : LaneTiles {
  static constexpr int kAcc = kLanes;
  static constexpr uint64_t kBlockBytes = sizeof(BlockIQ4_XS);
  __m512 d;

  IQ4XSRows16(const uint8_t* b0, uint64_t x_row, int64_t nr) {
    const RowGather gather(b0, x_row, nr);
    const __m512i high = gather(offsetof(BlockIQ4_XS, scales_h)), low = gather(offsetof(BlockIQ4_XS, scales_l));
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kValuesIQ4NL)));
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (int j = 0; j < kSub; ++j) {  // sub-block j: elements 0-15 the low nibbles of qs[16j..], 16-31 the high
      const __m512i sl = _mm512_and_si512(_mm512_srli_epi32(low, 4 * j), _mm512_set1_epi32(0xF));
      const __m512i sh = _mm512_and_si512(_mm512_srli_epi32(high, 2 * j), _mm512_set1_epi32(3));
      const __m512i ls = _mm512_sub_epi32(_mm512_or_si512(sl, _mm512_slli_epi32(sh, 4)), _mm512_set1_epi32(32));
      const __m512i sc16 = pair16(ls, ls);
      for (int l = 0; l < kLanes / 2; ++l) {
        const __m512i q = gather(offsetof(BlockIQ4_XS, qs) + 16 * j + 4 * l);
        store_signed(l, j, _mm512_shuffle_epi8(table, _mm512_and_si512(q, low4)), sc16);
        store_signed(l + 4, j, _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q, 4), low4)), sc16);
      }
    }
    d = gather_halves(b0 + offsetof(BlockIQ4_XS, d), gather.offsets, nr);
  }

  void token_group(int64_t nt, const uint8_t* y, uint64_t y_row, int64_t i, float (*acc)[kAcc][kTile]) const {
    const uint8_t* blocks = y + i * sizeof(BlockQ8_K);
    __m512 dt[kTile];
    for (int64_t t = 0; t < nt; ++t)
      dt[t] = _mm512_mul_ps(d, _mm512_set1_ps(reinterpret_cast<const BlockQ8_K*>(blocks + t * y_row)->d));
    lanes(nt, blocks, y_row, [&](int l, int64_t t, __m512i sums) {
      _mm512_store_ps(acc[t][l], _mm512_fmadd_ps(dt[t], _mm512_cvtepi32_ps(sums), _mm512_load_ps(acc[t][l])));
    });
  }

  static __m512 finish(const float (&acc)[kAcc][kTile]) { return hsum(acc); }
};

// The loops of all the tile kernels, for one tile of at most 16 rows against tokens [0, nt): super-block i of the
// rows is transposed once (rows_at(i), a Rows) and met by the tokens in blocks of kTokenBlock, groups of 16 within;
// each token's Rows::kAcc accumulators (16 floats, lane r = row r) start at zero and Rows::finish turns them into
// the token's outputs of rows [0, rows).
template <typename Rows, typename RowsAt>
void tile_rows(RowsAt rows_at, int64_t rows, int64_t n, int64_t nt, const uint8_t* yb, uint64_t y_row, float* out,
               int64_t ldo) {
  alignas(64) float acc[kTokenBlock][Rows::kAcc][kTile];
  for (int64_t t0 = 0; t0 < nt; t0 += kTokenBlock) {
    const int64_t tokens = std::min<int64_t>(kTokenBlock, nt - t0);
    std::fill(&acc[0][0][0], &acc[0][0][0] + kTokenBlock * Rows::kAcc * kTile, 0.0f);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
      const Rows w = rows_at(i);
      for (int64_t g0 = 0; g0 < tokens; g0 += kTile)
        w.token_group(std::min<int64_t>(kTile, tokens - g0), yb + (t0 + g0) * y_row, y_row, i, acc + g0);
    }
    for (int64_t t = 0; t < tokens; ++t)
      _mm512_mask_storeu_ps(out + (t0 + t) * ldo, first_lanes(rows), Rows::finish(acc[t]));
  }
}

// Rows in file order, 16 a tile.
template <typename Rows>
void gemm_tiles(int64_t n, int64_t nr, int64_t nt, const void* x, uint64_t x_row, const void* y, uint64_t y_row,
                float* out, int64_t ldo) {
  const uint8_t* xb = static_cast<const uint8_t*>(x);
  load_config();
  for (int64_t r0 = 0; r0 < nr; r0 += kTile) {
    const int64_t rows = std::min<int64_t>(kTile, nr - r0);
    tile_rows<Rows>([&](int64_t i) { return Rows(xb + r0 * x_row + i * Rows::kBlockBytes, x_row, rows); }, rows, n, nt,
                    static_cast<const uint8_t*>(y), y_row, out + r0, ldo);
  }
}

// gemm_tiles over rows stored in groups of 16 (RowGroups): whole groups from their group layout, a tensor's last
// rows (fewer than a group) in file order.
template <typename Rows>
void grouped_gemm_tiles(int64_t n, int64_t nr, int64_t nt, const void* x, uint64_t x_row, const void* y, uint64_t y_row,
                        float* out, int64_t ldo) {
  const uint8_t* xb = static_cast<const uint8_t*>(x);
  const int64_t groups = nr / kTile;
  load_config();
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* group = xb + g * kTile * x_row;
    tile_rows<Rows>([&](int64_t i) { return Rows(group + i * kTile * Rows::kBlockBytes); }, kTile, n, nt,
                    static_cast<const uint8_t*>(y), y_row, out + g * kTile, ldo);
  }
  if (nr % kTile)
    gemm_tiles<Rows>(n, nr % kTile, nt, xb + groups * kTile * x_row, x_row, y, y_row, out + groups * kTile, ldo);
}

}  // namespace

TT_TILE_DECL(tile_repack_gemm_q4_k) { gemm_tiles<Q4KRows16>(n, nr, nt, x, x_row, y, y_row, out, ldo); }
TT_TILE_DECL(tile_q4_k_rows16_gemm) { grouped_gemm_tiles<Q4KRows16>(n, nr, nt, x, x_row, y, y_row, out, ldo); }
TT_TILE_DECL(tile_repack_gemm_q2_k) { gemm_tiles<Q2KRows16>(n, nr, nt, x, x_row, y, y_row, out, ldo); }

TT_TILE_DECL(tile_q6_k) {
  if (nt == 1) return avx512::tile_q6_k(n, nr, nt, x, x_row, y, y_row, out, ldo);
  gemm_tiles<Q6KRows16>(n, nr, nt, x, x_row, y, y_row, out, ldo);
}

TT_TILE_DECL(tile_iq4_xs) {
  if (nt == 1) return DotKernel{avx512::vec_dot_iq4_xs}.run_tile(n, nr, nt, x, x_row, y, y_row, out, ldo);
  gemm_tiles<IQ4XSRows16>(n, nr, nt, x, x_row, y, y_row, out, ldo);
}

TT_TILE_DECL(tile_q5_k) {
  // A lone token: the AVX-512 kernel, row by row (the AVX-512 table has no Q5_K tile).
  if (nt == 1) return DotKernel{avx512::vec_dot_q5_k}.run_tile(n, nr, nt, x, x_row, y, y_row, out, ldo);
  gemm_tiles<Q5KRows16>(n, nr, nt, x, x_row, y, y_row, out, ldo);
}

}  // namespace tt::amx
