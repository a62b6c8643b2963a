// BF16 dots with VDPBF16PS, for CPUs with AVX512-BF16. llama.cpp computes BF16 with this very instruction on such
// CPUs, so its float orders come out bit for bit; ref::vec_dot_bf16_avx512bf16 and ref::dot_bf16_tinyblas emulate
// them on any CPU (tests compare the two).
#include <immintrin.h>

#include <algorithm>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/kernels.h"

// GCC 12 warns about _mm512_undefined_* inside its own reduce intrinsic (the false positive simd_x86.h also
// silences).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace tt::avx512bf16 {
namespace {

inline __m512bh load_bf16(const uint16_t* p) { return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p)); }

// tinyBLAS's tile of RM weight rows x RN tokens: one accumulator per output over 32-element steps, one reduction.
template <int RM, int RN>
void tinyblas_block(int64_t n, const uint8_t* x, uint64_t x_row, const uint8_t* y, uint64_t y_row, float* out,
                    int64_t ldo) {
  __m512 acc[RN][RM];
  for (auto& row : acc)
    for (__m512& a : row) a = _mm512_setzero_ps();
  for (int64_t k = 0; k < n; k += 32) {
    __m512bh a[RM];
    for (int i = 0; i < RM; ++i) a[i] = load_bf16(reinterpret_cast<const uint16_t*>(x + i * x_row) + k);
    for (int j = 0; j < RN; ++j) {
      const __m512bh b = load_bf16(reinterpret_cast<const uint16_t*>(y + j * y_row) + k);
      for (int i = 0; i < RM; ++i) acc[j][i] = _mm512_dpbf16_ps(acc[j][i], a[i], b);
    }
  }
  for (int j = 0; j < RN; ++j)
    for (int i = 0; i < RM; ++i) out[j * ldo + i] = _mm512_reduce_add_ps(acc[j][i]);
}

using BlockFn = void (*)(int64_t, const uint8_t*, uint64_t, const uint8_t*, uint64_t, float*, int64_t);
// [RM - 1][RN - 1]: 4 x 4 outputs hold 16 accumulators and 8 loaded vectors of the 32 registers.
constexpr BlockFn kBlocks[4][4] = {
    {tinyblas_block<1, 1>, tinyblas_block<1, 2>, tinyblas_block<1, 3>, tinyblas_block<1, 4>},
    {tinyblas_block<2, 1>, tinyblas_block<2, 2>, tinyblas_block<2, 3>, tinyblas_block<2, 4>},
    {tinyblas_block<3, 1>, tinyblas_block<3, 2>, tinyblas_block<3, 3>, tinyblas_block<3, 4>},
    {tinyblas_block<4, 1>, tinyblas_block<4, 2>, tinyblas_block<4, 3>, tinyblas_block<4, 4>}};

}  // namespace

void vec_dot_bf16(int64_t n, float* result, const void* vx, const void* vy) {
  const uint16_t* x = static_cast<const uint16_t*>(vx);
  const uint16_t* y = static_cast<const uint16_t*>(vy);
  __m512 c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    c1 = _mm512_dpbf16_ps(c1, load_bf16(x + i), load_bf16(y + i));
    c2 = _mm512_dpbf16_ps(c2, load_bf16(x + i + 32), load_bf16(y + i + 32));
  }
  double sum = static_cast<double>(_mm512_reduce_add_ps(c1));
  sum += static_cast<double>(_mm512_reduce_add_ps(c2));
  for (; i < n; ++i) sum += static_cast<double>(bf16_to_fp32(x[i]) * bf16_to_fp32(y[i]));
  *result = static_cast<float>(sum);
}

void dot_bf16_tinyblas(int64_t n, float* result, const void* x, const void* y) {
  tile_bf16_tinyblas(n, 1, 1, x, 0, y, 0, result, 0);
}

TT_TILE_DECL(tile_bf16_tinyblas) {
  TT_CHECK(n % 32 == 0, "tile_bf16_tinyblas: n = {} is not a multiple of 32", n);
  const auto* xb = static_cast<const uint8_t*>(x);
  const auto* yb = static_cast<const uint8_t*>(y);
  for (int64_t t = 0; t < nt; t += 4)
    for (int64_t r = 0; r < nr; r += 4) {
      const int64_t rm = std::min<int64_t>(4, nr - r), rn = std::min<int64_t>(4, nt - t);
      kBlocks[rm - 1][rn - 1](n, xb + r * x_row, x_row, yb + t * y_row, y_row, out + t * ldo + r, ldo);
    }
}

}  // namespace tt::avx512bf16
