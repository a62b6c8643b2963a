// AMX-INT8 tile kernels of the 32-element blocks (CMakeLists.txt compiles *_amx.cpp with AVX-512 + AMX flags).
// TDPBSSD multiplies a tile of 16 tokens x one block (A, read in place from the Q8_0 activation rows) by a tile of
// one block x 16 weight rows (B, the weight rows' quants as int8, transposed to the tile's 4-byte groups per call);
// the exact int32 block sums then get their scales in AVX-512, one FMA per block in block order: llama.cpp's AMX
// order for Q8_0 (ref::amx_dot_q8_0) and its repacked order for Q4_0 and IQ4_NL (ref::repack_dot_q4_0 and
// ref::repack_dot_iq4_nl are the same steps), so the Q4_0 and IQ4_NL tiles are bit-identical to the AVX-512 ones.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns about _mm512_undefined_* inside its own intrinsic headers (a known false positive; simd_x86.h).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "quant/amx_x86.h"
#include "quant/blocks.h"
#include "quant/kernels.h"

namespace tt::amx {
namespace {

constexpr int kChunk = 8;  // blocks whose weights are transposed together, then met by every token
// Tile registers: tmm0 / tmm3 the int32 sums C, tmm1 / tmm4 the tokens A, tmm2 / tmm5 the weights B (GCC's tile
// intrinsics take the register number as a literal).

void load_config() {
  TileConfig c;
  for (int set : {0, 3}) {
    c.rows[set] = kTile, c.colsb[set] = kTile * 4;            // C: int32 sums, tokens x weight rows
    c.rows[set + 1] = kTile, c.colsb[set + 1] = 32;           // A: tokens x one block's quants
    c.rows[set + 2] = kGroups, c.colsb[set + 2] = kTile * 4;  // B: 4-byte groups x weight rows
  }
  load_tile_config(c);
}

// The 16 values a 4-bit quant stands for.
constexpr int8_t kValuesQ4_0[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};

// The weights of rows [0, nr) (nr <= 16) for blocks [b0, b0 + nb) as B tiles: bt[j][k][4r + i] = element 4k + i of
// row r's block b0 + j as int8 (rows beyond nr zero), and their scales as floats (zero beyond nr).
template <typename Block>
void transpose_weights(const uint8_t* x, uint64_t x_row, int64_t nr, int64_t b0, int64_t nb, uint8_t* bt, __m512* dx) {
  const __mmask16 valid = first_lanes(nr);
  const __m512i offsets = row_offsets(x_row);
  for (int64_t j = 0; j < nb; ++j) {
    const uint8_t* block = x + (b0 + j) * sizeof(Block);
    auto group = [&](int k) {  // qs[4k, 4k + 4) of every row
      return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, offsets, block + offsetof(Block, qs) + 4 * k,
                                         1);
    };
    auto store = [&](int k, __m512i g) { _mm512_storeu_si512(bt + (j * kGroups + k) * 64, g); };
    if constexpr (std::is_same_v<Block, BlockQ8_0>) {
      for (int k = 0; k < kGroups; ++k) store(k, group(k));
    } else {
      // Elements 0-15 are qs's low nibbles, 16-31 its high ones; each nibble picks its value from the block's table.
      const int8_t* values = std::is_same_v<Block, BlockQ4_0> ? kValuesQ4_0 : kValuesIQ4NL;
      const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
      const __m512i low4 = _mm512_set1_epi8(0x0F);
      const __mmask64 bytes = nr == kTile ? ~__mmask64{0} : (__mmask64{1} << (4 * nr)) - 1;
      for (int k = 0; k < kGroups / 2; ++k) {
        const __m512i g = group(k);
        store(k, _mm512_maskz_shuffle_epi8(bytes, table, _mm512_and_si512(g, low4)));
        store(k + kGroups / 2,
              _mm512_maskz_shuffle_epi8(bytes, table, _mm512_and_si512(_mm512_srli_epi16(g, 4), low4)));
      }
    }
    dx[j] = gather_halves(block, offsets, nr);
  }
}

// out[t * ldo + r] (+)= the blocks [b0, b0 + nb) of tokens [0, nt) (nt <= 16) x the transposed rows; r < nr.
void token_group(int64_t nt, int64_t nr, const uint8_t* y, uint64_t y_row, int64_t b0, int64_t nb, const uint8_t* bt,
                 const __m512* dx, bool first, float* out, int64_t ldo) {
  const __mmask16 rows = static_cast<__mmask16>((1u << nr) - 1);
  // A tiles: the tokens' quants in place, or for a short group a copy with zero rows beyond its tokens.
  alignas(64) int8_t padded[kChunk][kTile][32];
  const uint8_t* a = y + b0 * sizeof(BlockQ8_0) + offsetof(BlockQ8_0, qs);
  uint64_t a_block = sizeof(BlockQ8_0), a_stride = y_row;
  if (nt < kTile) {
    std::memset(padded, 0, sizeof(padded));
    for (int64_t j = 0; j < nb; ++j)
      for (int64_t t = 0; t < nt; ++t) std::memcpy(padded[j][t], a + t * y_row + j * sizeof(BlockQ8_0), 32);
    a = reinterpret_cast<const uint8_t*>(padded), a_block = sizeof(padded[0]), a_stride = 32;
  }
  alignas(64) float dy[kChunk][kTile];  // the tokens' scales, zero beyond nt
  const __m512i tokens = row_offsets(y_row);
  for (int64_t j = 0; j < nb; ++j) _mm512_store_ps(dy[j], gather_halves(y + (b0 + j) * sizeof(BlockQ8_0), tokens, nt));
  __m512 acc[kTile];
  for (int t = 0; t < kTile; ++t)
    acc[t] = first || t >= nt ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(rows, out + t * ldo);
  alignas(64) int32_t c[kTile][kTile];
  auto scale = [&](int64_t j) {
    for (int t = 0; t < kTile; ++t)
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[t])),
                               _mm512_mul_ps(dx[j], _mm512_set1_ps(dy[j][t])), acc[t]);
  };
  // Two sets of tiles take alternate blocks (tmm0-2 even, tmm3-5 odd): one block's product runs while the
  // previous block's sums are scaled.
  // GCC's _tile_* macros paste their tile numbers into the instruction text, so the two sets are spelled out.
  _tile_loadd(1, a, a_stride);
  _tile_loadd(2, bt, 64);
  _tile_zero(0);
  _tile_dpbssd(0, 1, 2);
  for (int64_t j = 0; j < nb; j += 2) {
    if (j + 1 < nb) {
      _tile_loadd(4, a + (j + 1) * a_block, a_stride);
      _tile_loadd(5, bt + (j + 1) * kGroups * 64, 64);
      _tile_zero(3);
      _tile_dpbssd(3, 4, 5);
    }
    _tile_stored(0, c, kTile * 4);
    scale(j);
    if (j + 1 < nb) {
      if (j + 2 < nb) {
        _tile_loadd(1, a + (j + 2) * a_block, a_stride);
        _tile_loadd(2, bt + (j + 2) * kGroups * 64, 64);
        _tile_zero(0);
        _tile_dpbssd(0, 1, 2);
      }
      _tile_stored(3, c, kTile * 4);
      scale(j + 1);
    }
  }
  for (int64_t t = 0; t < nt; ++t) _mm512_mask_storeu_ps(out + t * ldo, rows, acc[t]);
}

template <typename Block>
void tile_b32(int64_t n, int64_t nr, int64_t nt, const void* x, uint64_t x_row, const void* y, uint64_t y_row,
              float* out, int64_t ldo) {
  const uint8_t* xb = static_cast<const uint8_t*>(x);
  const uint8_t* yb = static_cast<const uint8_t*>(y);
  load_config();
  alignas(64) uint8_t bt[kChunk * kGroups * 64];
  __m512 dx[kChunk];
  const int64_t blocks = n / 32;
  if (blocks == 0)
    for (int64_t t = 0; t < nt; ++t) std::fill(out + t * ldo, out + t * ldo + nr, 0.0f);
  for (int64_t r0 = 0; r0 < nr; r0 += kTile) {
    const int64_t rows = std::min<int64_t>(kTile, nr - r0);
    for (int64_t b0 = 0; b0 < blocks; b0 += kChunk) {
      const int64_t nb = std::min<int64_t>(kChunk, blocks - b0);
      transpose_weights<Block>(xb + r0 * x_row, x_row, rows, b0, nb, bt, dx);
      for (int64_t t0 = 0; t0 < nt; t0 += kTile)
        token_group(std::min<int64_t>(kTile, nt - t0), rows, yb + t0 * y_row, y_row, b0, nb, bt, dx, b0 == 0,
                    out + t0 * ldo + r0, ldo);
    }
  }
}

}  // namespace

TT_TILE_DECL(tile_q8_0) { tile_b32<BlockQ8_0>(n, nr, nt, x, x_row, y, y_row, out, ldo); }
TT_TILE_DECL(tile_repack_q4_0) { tile_b32<BlockQ4_0>(n, nr, nt, x, x_row, y, y_row, out, ldo); }
TT_TILE_DECL(tile_repack_iq4_nl) { tile_b32<BlockIQ4_NL>(n, nr, nt, x, x_row, y, y_row, out, ldo); }

}  // namespace tt::amx
