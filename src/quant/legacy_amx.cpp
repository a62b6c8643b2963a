// AMX-INT8 tile kernels of the 32-element blocks (CMakeLists.txt compiles *_amx.cpp with AVX-512 + AMX flags).
// TDPBSSD multiplies a tile of 16 tokens x one block (A, read in place from the Q8_0 activation rows) by a tile of
// one block x 16 weight rows (B, the weight rows' quants transposed to the tile's 4-byte groups per call); the exact
// int32 block sums then get their scales in AVX-512, one FMA per block in block order (ref::amx_dot_q8_0).
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

// The weights of rows [0, nr) (nr <= 16) for blocks [b0, b0 + nb) as B tiles: bt[j][k][4r + i] = qs[4k + i] of row
// r's block b0 + j (rows beyond nr zero), and their scales as floats (zero beyond nr).
void transpose_weights(const uint8_t* x, uint64_t x_row, int64_t nr, int64_t b0, int64_t nb, uint8_t* bt, __m512* dx) {
  const __mmask16 valid = static_cast<__mmask16>((1u << nr) - 1);
  const __m512i offsets = row_offsets(x_row);
  for (int64_t j = 0; j < nb; ++j) {
    const uint8_t* block = x + (b0 + j) * sizeof(BlockQ8_0);
    for (int k = 0; k < kGroups; ++k) {
      const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, offsets,
                                                    block + offsetof(BlockQ8_0, qs) + 4 * k, 1);
      _mm512_storeu_si512(bt + (j * kGroups + k) * 64, g);
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

}  // namespace

TT_TILE_DECL(tile_q8_0) {
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
      transpose_weights(xb + r0 * x_row, x_row, rows, b0, nb, bt, dx);
      for (int64_t t0 = 0; t0 < nt; t0 += kTile)
        token_group(std::min<int64_t>(kTile, nt - t0), rows, yb + t0 * y_row, y_row, b0, nb, bt, dx, b0 == 0,
                    out + t0 * ldo + r0, ldo);
    }
  }
}

}  // namespace tt::amx
