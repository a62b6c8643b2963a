// Pieces of the row-group layouts (RowGroups, quant.h) that the AVX-512 and the AMX kernels both read; for files
// compiled with AVX-512 (*_avx512.cpp, *_amx.cpp).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "quant/blocks.h"

namespace tt {

// get_scale_min_k4 for the 16 rows of a Q4_K group's super-block, row r in lane r: byte j of scales[0] / mins[0] is
// sub-block j's, of scales[1] / mins[1] sub-block j + 4's.
struct K4ScalesLanes {
  __m512i scales[2], mins[2];
  explicit K4ScalesLanes(const uint8_t* sb) {
    const __m512i low4 = _mm512_set1_epi8(0x0F), low6 = _mm512_set1_epi8(0x3F), top2 = _mm512_set1_epi8(0x30);
    const __m512i s0 = _mm512_loadu_si512(sb + Q4KGroup::kScales), s1 = _mm512_loadu_si512(sb + Q4KGroup::kScales + 64);
    const __m512i s2 = _mm512_loadu_si512(sb + Q4KGroup::kScales + 128);
    scales[0] = _mm512_and_si512(s0, low6);
    mins[0] = _mm512_and_si512(s1, low6);
    scales[1] = _mm512_or_si512(_mm512_and_si512(s2, low4), _mm512_and_si512(_mm512_srli_epi32(s0, 2), top2));
    mins[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(s2, 4), low4),
                              _mm512_and_si512(_mm512_srli_epi32(s1, 2), top2));
  }
  // Sub-block j's scale of each row as an int32.
  __m512i scale(int j) const {
    return _mm512_and_si512(_mm512_srli_epi32(scales[j / 4], 8 * (j % 4)), _mm512_set1_epi32(0xFF));
  }
  __m512i min(int j) const {
    return _mm512_and_si512(_mm512_srli_epi32(mins[j / 4], 8 * (j % 4)), _mm512_set1_epi32(0xFF));
  }
};

}  // namespace tt
