// Shared by the x86 SIMD kernel families (*_x86.inc), each included by a *_avx2.cpp and a *_avx512.cpp file that
// CMakeLists.txt compiles with that instruction set's -m flags. Before including, define TT_SIMD_NS (the
// namespace of the exported functions, declared in kernels.h) and TT_SIMD_VNNI (0/1: the AVX-512 VNNI build, which
// also gets 512-bit variants of some kernels). Each kernel's scalar reference has its name in namespace ref
// (reference.cpp, repack.cpp).
//
// Integer parts are exact: per block (or 16/32-element sub-block) the integer dot product equals the reference's;
// only the order of the float scaling and accumulation differs. Products go through _mm256_maddubs_epi16
// (unsigned x signed bytes, pairs summed with int16 saturation) only where both pair sums stay below 2^15:
// activations are in [-127, 127] (as every Q8 quantizer produces) and the unsigned side is at most 128.
#pragma once

#if TT_SIMD_VNNI && defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns about _mm512_undefined_* inside its own intrinsic headers (a known false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/kernels.h"

namespace tt::TT_SIMD_NS {
namespace {

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

// n elements of T in this thread's buffer (one per element type, grown and never shrunk): a tile's per-call scratch
// without an allocation a call, which generation's many small calls would pay each time (MUL_MAT_ID's 16-row units:
// thousands a step). Callers with the same T must not nest.
template <typename T>
T* thread_buffer(size_t n) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// _mm512_reduce_add_ps's tree over 16 lanes held as two registers (lanes 0-7, 8-15): ref's reduce_add_16_x86.
inline float reduce_add_16(__m256 lo, __m256 hi) { return hsum(_mm256_add_ps(hi, lo)); }

// ggml's AVX-512 ggml_v_expf (ggml-cpu/vec.h) on 8 lanes, lane for lane: the same FMAs and constants, its
// _mm512_scalef_ps as two exact power-of-two multiplies.
inline __m256 ggml_v_expf(__m256 x) {
  const __m256 r = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
  const __m256 n = _mm256_sub_ps(z, r);
  const __m256 b =
      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
  // scalef(j, n) = j * 2^n rounded once: as j * 2^a (exact, |a| <= 96) * 2^(n - a).
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i a = _mm256_srai_epi32(ni, 1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(a, bias), 23));
  const __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, a), bias), 23));
  const __m256 res = _mm256_mul_ps(_mm256_mul_ps(j, p1), p2);
  const __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  const __m256 out_of_range = _mm256_cmp_ps(abs_n, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
  if (_mm256_testz_ps(out_of_range, out_of_range)) return res;
  const __m256 alt = _mm256_blendv_ps(_mm256_set1_ps(INFINITY), _mm256_setzero_ps(),
                                      _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ));
  return _mm256_blendv_ps(res, alt, out_of_range);
}

#if TT_SIMD_VNNI
// ggml_v_expf (ggml-cpu/vec.h) on 16 lanes, as written there: the AVX-512 set's own copy of the function above,
// whose 8 lanes cost the tiled attention 15-31% of its speed (docs/performance.md, "Tiled attention").
inline __m512 ggml_v_expf16(__m512 x) {
  const __m512 r = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
  const __m512 n = _mm512_sub_ps(z, r);
  const __m512 b =
      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __mmask16 d = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 j = _mm512_fmadd_ps(
      _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
      u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
  const __m512 res = _mm512_scalef_ps(j, n);
  if (_mm512_kortestz(d, d)) return res;
  const __m512 alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ),
                                          _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
  return _mm512_mask_blend_ps(d, res, alt);
}
#endif

inline int hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// Prefetch (into L2) of the next group of rows while a kernel reads the current group as several strided streams
// (8 rows side by side, one block of each per iteration): the next group is one contiguous range, and iteration i
// of `parts` asks for its i-th slice, so it arrives in order, spread over the group's work, ahead of its use.
struct NextRowsPrefetch {
  const uint8_t* next;  // null: nothing to prefetch (the last group of a call)
  uint64_t bytes;       // of the next group
  uint64_t slice;       // bytes a part, whole cache lines
  NextRowsPrefetch(const uint8_t* next_rows, uint64_t group_bytes, int64_t parts)
      : next(next_rows), bytes(group_bytes), slice((group_bytes + 64 * parts - 1) / (64 * parts) * 64) {}
  void part(int64_t i) const {
    if (next == nullptr) return;
    for (uint64_t o = static_cast<uint64_t>(i) * slice, end = std::min(bytes, o + slice); o < end; o += 64)
      _mm_prefetch(reinterpret_cast<const char*>(next + o), _MM_HINT_T1);
  }
};

// Asks for `bytes` from p on into L1, a cache line a cycle: a kernel that streams a contiguous range of weights calls
// it at each step for the bytes a few steps ahead. Each line's address is the previous one's plus a stride held in a
// register; with the stride a constant the CPU resolves the adds at once and the prefetches leave together, which
// measured slower than none (docs/performance.md, "Prefetch").
inline void prefetch_ahead(const void* p, uint64_t bytes) {
  uint64_t line = 64;
  asm("" : "+r"(line));  // keeps the stride in a register (see above)
  for (uint64_t o = 0; o < bytes; o += line) _mm_prefetch(static_cast<const char*>(p) + o, _MM_HINT_T0);
}

// dst[c][r] = src[r][c] for an 8 x 8 block of 32-bit values (rows lds and ldd values apart; shuffles only, so any
// 32-bit data passes through unchanged).
template <typename T>
inline void transpose8(const T* src, int64_t lds, T* dst, int64_t ldd) {
  static_assert(sizeof(T) == 4);
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(reinterpret_cast<const float*>(src + i * lds));
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(reinterpret_cast<float*>(dst + i * ldd), _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(reinterpret_cast<float*>(dst + (i + 4) * ldd), _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// ggml_vec_dot_f16 as llama.cpp's AVX-512 build computes it (LlamaCppBuild::kAmdAvx512): 64-element steps in four
// 16-lane FMA accumulators (here each two registers), reduced (a0 + a2) + (a1 + a3) and by _mm512_reduce_add_ps's
// tree (hsum of the halves' sum); the tail, all of it when n < 64, summed in double. ref::vec_dot_f16_simd64 bit for
// bit. Inlined: attention calls it once per cache position on heads of 64 elements.
[[gnu::always_inline]] inline float dot_f16_simd64_inline(const uint16_t* x, const uint16_t* y, int64_t n) {
  const int64_t np = n & ~int64_t{63};
  double sum = 0.0;
  if (np > 0) {
    __m256 acc[4][2];
    for (auto& a : acc) a[0] = a[1] = _mm256_setzero_ps();
    for (int64_t i = 0; i < np; i += 64)
      for (int j = 0; j < 4; ++j)
        for (int h = 0; h < 2; ++h) {
          const int64_t e = i + 16 * j + 8 * h;
          acc[j][h] = _mm256_fmadd_ps(_mm256_cvtph_ps(load128(x + e)), _mm256_cvtph_ps(load128(y + e)), acc[j][h]);
        }
    __m256 v[2];
    for (int h = 0; h < 2; ++h)
      v[h] = _mm256_add_ps(_mm256_add_ps(acc[0][h], acc[2][h]), _mm256_add_ps(acc[1][h], acc[3][h]));
    sum = static_cast<double>(reduce_add_16(v[0], v[1]));
  }
  for (int64_t i = np; i < n; ++i) sum += static_cast<double>(h2f(x[i]) * h2f(y[i]));
  return static_cast<float>(sum);
}

#if TT_SIMD_VNNI
// ggml's 8 float lanes of 16 rows (lane L of row r: lane r of a[L]) summed in hsum's order,
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)): the row-group kernels' final sum (bit for bit with hsum).
inline __m512 hsum_lanes(const __m512* a) {
  const __m512 even = _mm512_add_ps(_mm512_add_ps(a[0], a[4]), _mm512_add_ps(a[2], a[6]));
  const __m512 odd = _mm512_add_ps(_mm512_add_ps(a[1], a[5]), _mm512_add_ps(a[3], a[7]));
  return _mm512_add_ps(even, odd);
}
#endif

// acc + sums of 4 adjacent products u[i]*s[i] (u unsigned, s signed bytes) as 8 int32.
inline __m256i dot_us8_acc(__m256i acc, __m256i u, __m256i s) {
#if TT_SIMD_VNNI
  return _mm256_dpbusd_epi32(acc, u, s);
#else
  const __m256i p16 = _mm256_maddubs_epi16(u, s);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
#endif
}

// Sums of 4 adjacent signed products x[i]*y[i] as 8 int32 (|x| <= 128, |y| <= 127).
inline __m256i dot_s8(__m256i x, __m256i y) {
  return dot_us8_acc(_mm256_setzero_si256(), _mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

// acc + pairwise int16 products p16[i]*w16[i] summed into 8 int32.
inline __m256i madd16_acc(__m256i acc, __m256i p16, __m256i w16) {
#if TT_SIMD_VNNI
  return _mm256_dpwssd_epi32(acc, p16, w16);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, w16));
#endif
}

// 32 nibbles of a 16-byte array: low nibbles in bytes 0..15, high nibbles in bytes 16..31 (ggml element order).
inline __m256i nibbles32(const uint8_t* qs) {
  const __m128i q = load128(qs);
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// Byte i = 0x10 when bit i of the little-endian 32-bit word at p is set, else 0.
inline __m256i bits32_to_0x10(const uint8_t* p) {
  uint32_t w;
  std::memcpy(&w, p, sizeof(w));
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(w)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// ---- The 32-element blocks: each returns the 32 weights as signed (or, for the min types, unsigned) bytes.
inline __m256i quants(const BlockQ4_0& b) { return _mm256_sub_epi8(nibbles32(b.qs), _mm256_set1_epi8(8)); }
inline __m256i quants(const BlockQ4_1& b) { return nibbles32(b.qs); }
inline __m256i quants(const BlockQ5_0& b) {
  return _mm256_sub_epi8(_mm256_or_si256(nibbles32(b.qs), bits32_to_0x10(b.qh)), _mm256_set1_epi8(16));
}
inline __m256i quants(const BlockQ5_1& b) { return _mm256_or_si256(nibbles32(b.qs), bits32_to_0x10(b.qh)); }
inline __m256i quants(const BlockQ8_0& b) { return load256(b.qs); }
inline __m256i iq4_lookup(__m256i idx) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kValuesIQ4NL));
  return _mm256_shuffle_epi8(_mm256_set_m128i(t, t), idx);
}
inline __m256i quants(const BlockIQ4_NL& b) { return iq4_lookup(nibbles32(b.qs)); }

template <typename Block>
constexpr bool kUnsignedWithMin = requires(Block b) {
  b.m;
};

// ---- K-quant helpers (256-element super-blocks against Q8_K).

// 16 int16 lanes: lanes 0..7 = a, lanes 8..15 = b (scale per 16 elements of a 32-element maddubs result).
inline __m256i scale_pair16(int a, int b) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(b)), _mm_set1_epi16(static_cast<int16_t>(a)));
}

// sum_j bsums[j] * w[j] over the 16 sub-block sums of a Q8_K block (w: 16 int16).
inline int bsums_dot(const BlockQ8_K& y, __m256i w16) { return hsum(_mm256_madd_epi16(load256(y.bsums), w16)); }

// The 8 scales and 8 mins of a Q4_K / Q5_K super-block (as get_scale_min_k4), built in registers: a vector load
// of bytes just stored one by one would stall on store forwarding. scales: byte j = scale of sub-block j;
// mins16: int16 lanes 2j and 2j+1 = min of sub-block j (against the 16-element bsums of Q8_K).
struct K4Scales {
  uint64_t scales;  // byte j: scale of sub-block j
  uint64_t mins;    // byte j: min of sub-block j
  __m256i mins16;
};
inline K4Scales unpack_k4_scales(const uint8_t* packed) {
  uint32_t w[3];
  std::memcpy(w, packed, sizeof(w));
  const uint32_t sc_lo = w[0] & 0x3F3F3F3Fu, sc_hi = (w[2] & 0x0F0F0F0Fu) | (((w[0] >> 6) & 0x03030303u) << 4);
  const uint32_t mn_lo = w[1] & 0x3F3F3F3Fu, mn_hi = ((w[2] >> 4) & 0x0F0F0F0Fu) | (((w[1] >> 6) & 0x03030303u) << 4);
  const __m128i mins8 = _mm_set_epi32(0, 0, static_cast<int>(mn_hi), static_cast<int>(mn_lo));
  return {sc_lo | (static_cast<uint64_t>(sc_hi) << 32), mn_lo | (static_cast<uint64_t>(mn_hi) << 32),
          _mm256_cvtepu8_epi16(_mm_shuffle_epi8(mins8, _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7)))};
}
inline __m256i k4_scale16(uint64_t scales, int j) {
  return _mm256_set1_epi16(static_cast<int16_t>((scales >> (8 * j)) & 0xFF));
}

}  // namespace
}  // namespace tt::TT_SIMD_NS
