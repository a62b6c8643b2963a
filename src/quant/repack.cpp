// The float summation orders of llama.cpp's x86 "repack" kernels (ggml-cpu/arch/x86/repack.cpp), one weight row
// at a time. On AVX2 / AVX-512 machines llama.cpp stores Q4_0, IQ4_NL and Q4_K weights (and Q2_K with AVX-512)
// with 8 rows interleaved when the row count is a multiple of 8, and multiplies them with its gemv (one token)
// and gemm (4 tokens) kernels instead of vec_dot, for every batch size. Their integer parts are exact, so only
// the float steps need reproducing:
//   - Q4_0 / IQ4_NL (gemv and gemm): per 32-block, acc = fma(float(sumi), d_w * d_a, acc), one scalar accumulator
//     per (row, token);
//   - Q4_K gemv: per super-block, acc = fma(float(sum_j sc_j * dot_j), d_w * d_a, acc) and
//     acc_min = fma(float(sum_j m_j * bsum_j), dmin_w * d_a, acc_min); result acc - acc_min;
//   - Q4_K gemm: the same, but one FMA per pair of 32-element sub-blocks (64 elements);
//   - Q8_0 in llama.cpp's AMX kernels (ggml-cpu/amx/mmq.cpp, on CPUs with AMX-INT8): the Q4_0 order;
//   - Q2_K (AVX-512 only): gemv one FMA per super-block, gemm one per half super-block (128 elements), each for
//     acc (scales) and acc_min (mins); result acc - acc_min.
#include <cmath>
#include <cstdint>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/kernels.h"

namespace tt::ref {
namespace {

float h2f(uint16_t h) { return fp16_to_fp32(h); }

int dot32_q4_0(const BlockQ4_0& x, const int8_t* a) {
  int s = 0;
  for (int j = 0; j < 16; ++j) {
    s += ((x.qs[j] & 0xF) - 8) * a[j];
    s += ((x.qs[j] >> 4) - 8) * a[j + 16];
  }
  return s;
}

int dot32_q8_0(const BlockQ8_0& x, const int8_t* a) {
  int s = 0;
  for (int j = 0; j < 32; ++j) s += x.qs[j] * a[j];
  return s;
}

int dot32_iq4_nl(const BlockIQ4_NL& x, const int8_t* a) {
  int s = 0;
  for (int j = 0; j < 16; ++j) {
    s += kValuesIQ4NL[x.qs[j] & 0xF] * a[j];
    s += kValuesIQ4NL[x.qs[j] >> 4] * a[j + 16];
  }
  return s;
}

template <typename Block, int (*kDot)(const Block&, const int8_t*)>
void repack_b32(int64_t n, float* result, const void* vx, const void* vy) {
  const Block* x = static_cast<const Block*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / 32; ++i) {
    const int sumi = kDot(x[i], y[i].qs);
    acc = std::fma(static_cast<float>(sumi), h2f(x[i].d) * h2f(y[i].d), acc);
  }
  *result = acc;
}

// The float steps of the K-quant repack kernels for one super-block: the sub-blocks' scaled integer dots and min
// terms, summed kPerStep sub-blocks at a time (exact integers), each sum entering one FMA.
template <int kCount, int kPerStep>
void k_quant_steps(const int* terms, const int* min_terms, float d, float dmin, float& acc, float& acc_min) {
  for (int j0 = 0; j0 < kCount; j0 += kPerStep) {
    int isum = 0, imin = 0;
    for (int j = j0; j < j0 + kPerStep; ++j) {
      isum += terms[j];
      imin += min_terms[j];
    }
    acc = std::fma(static_cast<float>(isum), d, acc);
    acc_min = std::fma(static_cast<float>(imin), dmin, acc_min);
  }
}

// Q4_K: kPerStep 32-element sub-blocks per float step (8 for gemv, 2 for gemm).
template <int kPerStep>
void repack_q4_k(int64_t n, float* result, const void* vx, const void* vy) {
  const BlockQ4_K* x = static_cast<const BlockQ4_K*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  float acc = 0.0f, acc_min = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int terms[8], min_terms[8];
    for (int j = 0; j < 8; ++j) {  // sub-block j: elements 32j..32j+31, low nibbles for even j, high for odd
      const int g = j / 2, shift = 4 * (j % 2);
      int dot = 0;
      for (int l = 0; l < 32; ++l) dot += ((x[i].qs[32 * g + l] >> shift) & 0xF) * y[i].qs[32 * j + l];
      uint8_t sc, m;
      get_scale_min_k4(j, x[i].scales, &sc, &m);
      terms[j] = sc * dot;
      min_terms[j] = m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
    }
    k_quant_steps<8, kPerStep>(terms, min_terms, h2f(x[i].d) * y[i].d, h2f(x[i].dmin) * y[i].d, acc, acc_min);
  }
  *result = acc - acc_min;
}

// Q2_K: kPerStep 16-element sub-blocks per float step (16 for gemv, 8 for gemm).
template <int kPerStep>
void repack_q2_k(int64_t n, float* result, const void* vx, const void* vy) {
  const BlockQ2_K* x = static_cast<const BlockQ2_K*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  float acc = 0.0f, acc_min = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int terms[16], min_terms[16];
    for (int g = 0; g < 16; ++g) {  // sub-block g: elements 16g..16g+15
      const int half = g / 8, shift = 2 * ((g % 8) / 2), off = (g % 2) * 16;
      int dot = 0;
      for (int l = 0; l < 16; ++l) dot += y[i].qs[16 * g + l] * ((x[i].qs[32 * half + off + l] >> shift) & 3);
      terms[g] = (x[i].scales[g] & 0xF) * dot;
      min_terms[g] = (x[i].scales[g] >> 4) * y[i].bsums[g];
    }
    k_quant_steps<16, kPerStep>(terms, min_terms, h2f(x[i].d) * y[i].d, h2f(x[i].dmin) * y[i].d, acc, acc_min);
  }
  *result = acc - acc_min;
}

}  // namespace

void repack_gemv_q2_k(int64_t n, float* r, const void* x, const void* y) { repack_q2_k<16>(n, r, x, y); }
void repack_gemm_q2_k(int64_t n, float* r, const void* x, const void* y) { repack_q2_k<8>(n, r, x, y); }

void repack_dot_q4_0(int64_t n, float* r, const void* x, const void* y) {
  repack_b32<BlockQ4_0, dot32_q4_0>(n, r, x, y);
}
void amx_dot_q8_0(int64_t n, float* r, const void* x, const void* y) { repack_b32<BlockQ8_0, dot32_q8_0>(n, r, x, y); }
void repack_dot_iq4_nl(int64_t n, float* r, const void* x, const void* y) {
  repack_b32<BlockIQ4_NL, dot32_iq4_nl>(n, r, x, y);
}
void repack_gemv_q4_k(int64_t n, float* r, const void* x, const void* y) { repack_q4_k<8>(n, r, x, y); }
void repack_gemm_q4_k(int64_t n, float* r, const void* x, const void* y) { repack_q4_k<2>(n, r, x, y); }

}  // namespace tt::ref
