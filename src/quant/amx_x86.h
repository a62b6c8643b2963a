// Shared pieces of the AMX-INT8 tile kernels (*_amx.cpp, compiled with AVX-512 + AMX flags).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tt::amx {

constexpr int kTile = 16;   // tokens of an A tile, weight rows of a B tile
constexpr int kGroups = 8;  // 4-byte groups of a 32-element block: B tile rows

// The palette-1 tile configuration (Intel SDM, LDTILECFG's 64-byte memory operand); each kernel fills in its
// tiles' shapes and loads it.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// LDTILECFG of c. GCC 12's _tile_loadconfig tells the compiler the instruction reads 8 bytes (a pointer's worth),
// so once inlined the stores of the tile shapes may be dropped as dead (then the first tile load is #UD); this
// operand is all 64 bytes.
inline void load_tile_config(const TileConfig& c) { __asm__ volatile("ldtilecfg %0" ::"m"(c)); }

// Byte offsets of 16 rows `stride` bytes apart.
inline __m512i row_offsets(uint64_t stride) {
  return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                            _mm512_set1_epi32(static_cast<int>(stride)));
}

// Mask of the first n (<= 16) lanes.
inline __mmask16 first_lanes(int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }

// The halves at `p` + offsets[i] for i < n as floats, zero beyond n.
inline __m512 gather_halves(const uint8_t* p, __m512i offsets, int64_t n) {
  const __m512i d = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), first_lanes(n), offsets, p, 1);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d));  // the low half of each gathered dword is the value
}

}  // namespace tt::amx
