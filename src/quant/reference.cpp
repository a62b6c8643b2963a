// Scalar reference kernels: the oracle for the fast paths. Dequantization is written to give the same floats as
// ggml / gguf-py; dot products follow ggml's generic C kernels (integer sums per block, then scaled).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/attend.h"
#include "quant/blocks.h"
#include "quant/kernels.h"
#include "quant/x86_reduce.h"

namespace tt::ref {
namespace {

template <typename Block>
const Block* blocks(const void* p) {
  return static_cast<const Block*>(p);
}
template <typename Block>
Block* blocks(void* p) {
  return static_cast<Block*>(p);
}

float h2f(uint16_t h) { return fp16_to_fp32(h); }

// ggml's nearest_int: round half to even for |x| < 2^22.
int nearest_int(float x) {
  const float v = x + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, sizeof(i));
  return (i & 0x007FFFFF) - 0x00400000;
}

// Groups whose largest magnitude is below this quantize to zero (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// ---- The 32-element legacy blocks: integer quants q[0..31] (with offset applied for the symmetric types).

uint32_t load_qh(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, sizeof(v));
  return v;
}

void unpack(const BlockQ4_0& b, int* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = (b.qs[j] & 0xF) - 8;
    q[j + 16] = (b.qs[j] >> 4) - 8;
  }
}
void unpack(const BlockQ4_1& b, int* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = b.qs[j] & 0xF;
    q[j + 16] = b.qs[j] >> 4;
  }
}
template <typename Block>
void unpack_q5(const Block& b, int offset, int* q) {
  const uint32_t qh = load_qh(b.qh);
  for (int j = 0; j < 16; ++j) {
    q[j] = ((b.qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - offset;
    q[j + 16] = ((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - offset;
  }
}
void unpack(const BlockQ5_0& b, int* q) { unpack_q5(b, 16, q); }
void unpack(const BlockQ5_1& b, int* q) { unpack_q5(b, 0, q); }
void unpack(const BlockQ8_0& b, int* q) {
  for (int j = 0; j < 32; ++j) q[j] = b.qs[j];
}
void unpack(const BlockIQ4_NL& b, int* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = kValuesIQ4NL[b.qs[j] & 0xF];
    q[j + 16] = kValuesIQ4NL[b.qs[j] >> 4];
  }
}

// Blocks with a min (y = q*d + m) versus pure scale (y = q*d).
template <typename Block>
constexpr bool kHasMin = requires(Block b) {
  b.m;
};

template <typename Block>
void dequantize_legacy(const void* src, float* dst, int64_t n) {
  const Block* x = blocks<Block>(src);
  for (int64_t i = 0; i < n / 32; ++i) {
    int q[32];
    unpack(x[i], q);
    const float d = h2f(x[i].d);
    if constexpr (kHasMin<Block>) {
      const float m = h2f(x[i].m);
      for (int j = 0; j < 32; ++j) dst[i * 32 + j] = q[j] * d + m;
    } else {
      for (int j = 0; j < 32; ++j) dst[i * 32 + j] = q[j] * d;
    }
  }
}

// Dot of a legacy weight block row with Q8_0 (or Q8_1 for the types with a min) activations.
template <typename Block, typename YBlock>
void vec_dot_legacy(int64_t n, float* result, const void* vx, const void* vy) {
  const Block* x = blocks<Block>(vx);
  const YBlock* y = blocks<YBlock>(vy);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / 32; ++i) {
    int q[32];
    unpack(x[i], q);
    int sumi = 0;
    for (int j = 0; j < 32; ++j) sumi += q[j] * y[i].qs[j];
    if constexpr (kHasMin<Block>) {
      sum += (h2f(x[i].d) * h2f(y[i].d)) * sumi + h2f(x[i].m) * h2f(y[i].s);
    } else {
      sum += (h2f(x[i].d) * h2f(y[i].d)) * sumi;
    }
  }
  *result = sum;
}

// ---- K-quants. ggml's generic kernels keep 8 integer lanes per super-block (aux32[l] sums the products of
// positions l mod 8, each weighted by its sub-block scale) and 8 float lane sums across super-blocks.
struct LaneSums {
  float sums[8] = {};
  float total() const {
    float s = 0.0f;
    for (float v : sums) s += v;
    return s;
  }
};

// a: 256 unpacked quants, q8: 256 activations, scales: one per `group` (16 or 32) elements.
void accumulate_lanes(const int8_t* a, const int8_t* q8, const int* scales, int group, float d, LaneSums& acc) {
  int32_t aux32[8] = {};
  for (int j = 0; j < kQK_K; j += 8) {
    const int scale = scales[j / group];
    for (int l = 0; l < 8; ++l) aux32[l] += scale * (q8[j + l] * a[j + l]);
  }
  for (int l = 0; l < 8; ++l) acc.sums[l] += d * aux32[l];
}

// Q3_K quants in element order, values -4..3.
void unpack_q3_k(const BlockQ3_K& b, int8_t* a) {
  for (int n = 0; n < 2; ++n) {    // two halves of 128 elements, each using 32 bytes of qs
    for (int s = 0; s < 4; ++s) {  // four 2-bit planes
      const int bit = n * 4 + s;
      for (int l = 0; l < 32; ++l) {
        const int low = (b.qs[n * 32 + l] >> (2 * s)) & 3;
        const int high = (b.hmask[l] >> bit) & 1;
        a[n * 128 + s * 32 + l] = static_cast<int8_t>(low - (high ? 0 : 4));
      }
    }
  }
}

// Q4_K / Q5_K quants in element order (0..15 or 0..31).
template <typename Block>
void unpack_q45_k(const Block& b, int8_t* a) {
  for (int g = 0; g < 4; ++g) {  // groups of 64: 32 low nibbles then 32 high nibbles
    for (int l = 0; l < 32; ++l) {
      int lo = b.qs[g * 32 + l] & 0xF;
      int hi = b.qs[g * 32 + l] >> 4;
      if constexpr (requires { b.qh; }) {
        lo += ((b.qh[l] >> (2 * g)) & 1) << 4;
        hi += ((b.qh[l] >> (2 * g + 1)) & 1) << 4;
      }
      a[g * 64 + l] = static_cast<int8_t>(lo);
      a[g * 64 + 32 + l] = static_cast<int8_t>(hi);
    }
  }
}

// Q6_K quants in element order, values -32..31.
void unpack_q6_k(const BlockQ6_K& b, int8_t* a) {
  for (int n = 0; n < 2; ++n) {
    const uint8_t* ql = b.ql + 64 * n;
    const uint8_t* qh = b.qh + 32 * n;
    int8_t* out = a + 128 * n;
    for (int l = 0; l < 32; ++l) {
      out[l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
      out[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
      out[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      out[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

// The 8 scales and 8 mins of a Q4_K / Q5_K block.
void unpack_k4_scales(const uint8_t* packed, int* scales, int* mins) {
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, packed, &sc, &m);
    scales[j] = sc;
    mins[j] = m;
  }
}

// IQ4_XS 6-bit scale of sub-block ib (0..7), minus 32.
int iq4_xs_scale(const BlockIQ4_XS& b, int ib) {
  const int ls = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4);
  return ls - 32;
}

// Index of the level nearest to x, ties to the upper level: ggml's best_index_int8 compares 2x with the sums of
// neighbouring levels, both exact, so the midpoints are exact.
int best_index_iq4(float x) {
  const float x2 = x + x;
  int idx = 0;
  for (int step = 8; step > 0; step >>= 1) {
    const int j = idx + step;
    idx = x2 >= static_cast<float>(kValuesIQ4NL[j - 1] + kValuesIQ4NL[j]) ? j : idx;
  }
  return idx;
}

float absmax(const float* x, int n) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

// Element of largest magnitude (first one on ties), with its sign.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

}  // namespace

// ================================ float types

void dequantize_f32(const void* src, float* dst, int64_t n) { std::memcpy(dst, src, n * sizeof(float)); }
void quantize_f32(const float* src, void* dst, int64_t n) { std::memcpy(dst, src, n * sizeof(float)); }

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}
void dequantize_f16(const void* src, float* dst, int64_t n) {
  fp16_to_fp32_row(static_cast<const uint16_t*>(src), dst, n);
}
void quantize_f16(const float* src, void* dst, int64_t n) { fp32_to_fp16_row(src, static_cast<uint16_t*>(dst), n); }

void dequantize_bf16(const void* src, float* dst, int64_t n) {
  const uint16_t* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
}
void quantize_bf16(const float* src, void* dst, int64_t n) {
  uint16_t* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(src[i]);
}

// ggml accumulates float products in double (ggml_float).
void vec_dot_f32(int64_t n, float* result, const void* vx, const void* vy) {
  const float* x = static_cast<const float*>(vx);
  const float* y = static_cast<const float*>(vy);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * y[i]);
  *result = static_cast<float>(sum);
}

void vec_dot_f16(int64_t n, float* result, const void* vx, const void* vy) {
  const uint16_t* x = static_cast<const uint16_t*>(vx);
  const uint16_t* y = static_cast<const uint16_t*>(vy);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]));
  *result = static_cast<float>(sum);
}

void vec_dot_f16_simd64(int64_t n, float* result, const void* vx, const void* vy) {
  const uint16_t* x = static_cast<const uint16_t*>(vx);
  const uint16_t* y = static_cast<const uint16_t*>(vy);
  const int64_t np = n & ~int64_t{63};
  double sum = 0.0;
  if (np > 0) {
    float acc[4][16] = {};
    for (int64_t i = 0; i < np; i += 64)
      for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 16; ++l)
          acc[j][l] = std::fma(fp16_to_fp32(x[i + 16 * j + l]), fp16_to_fp32(y[i + 16 * j + l]), acc[j][l]);
    float v[16];
    for (int l = 0; l < 16; ++l) v[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    sum = static_cast<double>(reduce_add_16_x86(v));
  }
  for (int64_t i = np; i < n; ++i) sum += static_cast<double>(fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]));
  *result = static_cast<float>(sum);
}

void dot_f16_tinyblas(int64_t n, float* result, const void* vx, const void* vy) {
  TT_CHECK(n % 16 == 0, "dot_f16_tinyblas: n = {} is not a multiple of 16", n);
  const uint16_t* x = static_cast<const uint16_t*>(vx);
  const uint16_t* y = static_cast<const uint16_t*>(vy);
  float acc[16] = {};
  for (int64_t i = 0; i < n; i += 16)
    for (int l = 0; l < 16; ++l) acc[l] = std::fma(fp16_to_fp32(x[i + l]), fp16_to_fp32(y[i + l]), acc[l]);
  *result = reduce_add_16_x86(acc);
}

float dot_f16_simd64(const uint16_t* x, const uint16_t* y, int64_t n) {
  float r;
  vec_dot_f16_simd64(n, &r, x, y);
  return r;
}

TT_ATTEND_F16_DECL(attend_f16_simd64) {
  for (int qi = 0; qi < n_queries; ++qi) {
    for (int64_t i = 0; i < d; ++i) acc[i] = 0;
    AttendSteps<uint16_t, dot_f16_simd64, scale_f16, mad_f16> steps{q[qi], k, v, stride, d, acc};
    SoftmaxState state;
    attend(steps, &n_pos[qi], scale, &state);
    const float s = output_scale(state, partial, qi);
    for (int64_t i = 0; i < d; ++i) out[qi][i] = fp16_to_fp32(acc[i]) * s;
  }
}

TT_ATTEND_F16_DECL(attend_f16) {
  for (int qi = 0; qi < n_queries; ++qi) {  // one query at a time: the oracle for the multi-query kernels
    for (int64_t i = 0; i < d; ++i) acc[i] = 0;
    AttendSteps<uint16_t, dot_f16_double, scale_f16, mad_f16> steps{q[qi], k, v, stride, d, acc};
    SoftmaxState state;
    attend(steps, &n_pos[qi], scale, &state);
    const float s = output_scale(state, partial, qi);
    for (int64_t i = 0; i < d; ++i) out[qi][i] = fp16_to_fp32(acc[i]) * s;
  }
}

namespace {
// The tiled path's arithmetic (attend.h) one element at a time: the oracle of the SIMD tiles.
struct TileSteps : TiledScratch {
  const AttendTiledArgs& a;
  explicit TileSteps(const AttendTiledArgs& args) : TiledScratch(args), a(args) {}
  float element(const uint8_t* rows, int64_t pos, int64_t i) const {
    const uint8_t* row = rows + pos * a.stride;
    return a.f16 ? fp16_to_fp32(reinterpret_cast<const uint16_t*>(row)[i]) : reinterpret_cast<const float*>(row)[i];
  }
  void pack(int64_t p0, int64_t n) {
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < a.d; ++i) {
        kt[i * kTilePositions + j] = element(a.k, p0 + j, i);
        v[j * a.d + i] = element(a.v, p0 + j, i);
      }
  }
  void scores(int n_rows, int64_t n, float* kq) const {
    for (int r = 0; r < n_rows; ++r)
      for (int64_t j = 0; j < n; ++j) {
        float s = 0.0f;
        for (int64_t i = 0; i < a.d; ++i) s = std::fma(kt[i * kTilePositions + j], a.q[r][i], s);
        kq[r * kTilePositions + j] = s;
      }
  }
  float scale_max(float* row, int64_t n, float scale) const {
    float m = -INFINITY;
    for (int64_t j = 0; j < n; ++j) m = std::max(m, row[j] *= scale);
    return m;
  }
  double softmax(float* row, float max, int64_t n) const;  // below ggml_v_expf_lane
  void rescale(int r, float ms) {
    for (int64_t i = 0; i < a.d; ++i) acc[r * a.d + i] *= ms;
  }
  void accumulate(int n_rows, int64_t n, const float* kq) {
    for (int r = 0; r < n_rows; ++r)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < a.d; ++i)
          acc[r * a.d + i] = std::fma(v[j * a.d + i], kq[r * kTilePositions + j], acc[r * a.d + i]);
  }
  void finish(int r, float inv) const {
    for (int64_t i = 0; i < a.d; ++i) a.out[r][i] = acc[r * a.d + i] * inv;
  }
};
}  // namespace

TT_ATTEND_TILED_DECL(attend_tiled) {
  TileSteps steps(a);
  attend_in_tiles(steps, a, steps.kq);
}

namespace {
// ggml_v_expf (ggml-cpu/vec.h, AVX-512 variant: what llama.cpp runs on this machine), one lane at a time: the
// same fused multiply-adds and constants, scalef as ldexp (both exact or correctly rounded for integral n).
float ggml_v_expf_lane(float x) {
  const float r = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, r);
  const float nn = z - r;
  const float b = std::fma(-nn, 0x1.7f7d1cp-20f, std::fma(-nn, 0x1.62e4p-1f, x));
  const float u = b * b;
  const float j =
      std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
               std::fma(0x1.ffffecp-1f, b, 1.0f));
  if (std::fabs(nn) > 192.0f) return nn <= 0.0f ? 0.0f : INFINITY;
  return std::ldexp(j, static_cast<int>(nn));
}
}  // namespace

void rope_rotate(const float* in, float* out, const float* cos_sin, int n_dims, bool neox) {
  for (int i0 = 0; i0 < n_dims; i0 += 2) {
    const int a = neox ? i0 / 2 : i0;
    const int b = neox ? i0 / 2 + n_dims / 2 : i0 + 1;
    const float x0 = in[a], x1 = in[b];
    out[a] = std::fma(x0, cos_sin[i0], -(x1 * cos_sin[i0 + 1]));
    out[b] = std::fma(x0, cos_sin[i0 + 1], x1 * cos_sin[i0]);
  }
}

void swiglu_row(const float* g, const float* u, float* out, int64_t n) {
  const int64_t simd_end = n & ~int64_t{15};
  int64_t j = 0;
  for (; j < simd_end; ++j) out[j] = g[j] / (1.0f + ggml_v_expf_lane(0.0f - g[j])) * u[j];
  for (; j < n; ++j) out[j] = g[j] / (1.0f + std::exp(-g[j])) * u[j];
}

namespace {
// One 16-element chunk of ggml_vec_soft_max_f32 (AVX-512): out[i] = ggml_v_expf(x[i] - max); returns their sum by
// _mm512_reduce_add_ps's tree.
float exp_chunk16(const float* x, float max, float* out) {
  float lane[16];
  for (int i = 0; i < 16; ++i) lane[i] = out[i] = ggml_v_expf_lane(x[i] - max);
  for (int half = 8; half >= 1; half /= 2)  // the reduction tree: lane i += lane i + half
    for (int i = 0; i < half; ++i) lane[i] += lane[i + half];
  return lane[0];
}
}  // namespace

double TileSteps::softmax(float* row, float max, int64_t n) const {
  double sum = 0.0;
  for (int64_t c = 0; c < n; c += 16) sum += static_cast<double>(exp_chunk16(row + c, max, row + c));
  return sum;
}

void soft_max_row(const float* x, float* out, int64_t n) {
  float max = -INFINITY;
  for (int64_t j = 0; j < n; ++j) max = std::max(max, x[j]);
  const int64_t simd_end = n & ~int64_t{15};
  double sum = 0.0;
  int64_t j = 0;
  for (; j < simd_end; j += 16) sum += static_cast<double>(exp_chunk16(x + j, max, out + j));
  for (; j < n; ++j) {
    out[j] = std::exp(x[j] - max);
    sum += static_cast<double>(out[j]);
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (j = 0; j < n; ++j) out[j] *= inv;
}

float dot_f16_double(const uint16_t* x, const uint16_t* y, int64_t n) {
  float r;
  vec_dot_f16(n, &r, x, y);
  return r;
}

void mad_f16(uint16_t* acc, const uint16_t* v, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = fp32_to_fp16(std::fma(fp16_to_fp32(v[i]), s, fp16_to_fp32(acc[i])));
}

void scale_f16(uint16_t* acc, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = fp32_to_fp16(fp16_to_fp32(acc[i]) * s);
}

void vec_dot_bf16(int64_t n, float* result, const void* vx, const void* vy) {
  const uint16_t* x = static_cast<const uint16_t*>(vx);
  const uint16_t* y = static_cast<const uint16_t*>(vy);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(bf16_to_fp32(x[i]) * bf16_to_fp32(y[i]));
  *result = static_cast<float>(sum);
}

// BF16 as llama.cpp computes it on AVX512-BF16 machines, with VDPBF16PS: per 16 lanes, += odd product then +=
// even product, each rounded, denormal inputs read as zero and denormal sums flushed to zero.
namespace {
float bf16_daz(uint16_t h) { return (h & 0x7F80u) == 0 ? 0.0f : bf16_to_fp32(h); }
float ftz(float v) { return std::fabs(v) < std::numeric_limits<float>::min() ? 0.0f * v : v; }
void dpbf16(float* acc, const uint16_t* x, const uint16_t* y) {
  for (int l = 0; l < 16; ++l) {
    acc[l] = ftz(acc[l] + bf16_daz(x[2 * l + 1]) * bf16_daz(y[2 * l + 1]));
    acc[l] = ftz(acc[l] + bf16_daz(x[2 * l]) * bf16_daz(y[2 * l]));
  }
}
}  // namespace

// ggml_vec_dot_bf16: two accumulators over 64-element steps, each reduced into a double; the tail in double.
void vec_dot_bf16_avx512bf16(int64_t n, float* result, const void* vx, const void* vy) {
  const uint16_t* x = static_cast<const uint16_t*>(vx);
  const uint16_t* y = static_cast<const uint16_t*>(vy);
  float c1[16] = {}, c2[16] = {};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    dpbf16(c1, x + i, y + i);
    dpbf16(c2, x + i + 32, y + i + 32);
  }
  double sum = static_cast<double>(reduce_add_16_x86(c1));
  sum += static_cast<double>(reduce_add_16_x86(c2));
  for (; i < n; ++i) sum += static_cast<double>(bf16_to_fp32(x[i]) * bf16_to_fp32(y[i]));
  *result = static_cast<float>(sum);
}

// tinyBLAS (llamafile sgemm), what batches of tokens take: one accumulator over 32-element steps, one reduction.
void dot_bf16_tinyblas(int64_t n, float* result, const void* vx, const void* vy) {
  TT_CHECK(n % 32 == 0, "dot_bf16_tinyblas: n = {} is not a multiple of 32", n);
  const uint16_t* x = static_cast<const uint16_t*>(vx);
  const uint16_t* y = static_cast<const uint16_t*>(vy);
  float acc[16] = {};
  for (int64_t i = 0; i < n; i += 32) dpbf16(acc, x + i, y + i);
  *result = reduce_add_16_x86(acc);
}

// ================================ 32-element blocks

void dequantize_q4_0(const void* src, float* dst, int64_t n) { dequantize_legacy<BlockQ4_0>(src, dst, n); }
void dequantize_q4_1(const void* src, float* dst, int64_t n) { dequantize_legacy<BlockQ4_1>(src, dst, n); }
void dequantize_q5_0(const void* src, float* dst, int64_t n) { dequantize_legacy<BlockQ5_0>(src, dst, n); }
void dequantize_q5_1(const void* src, float* dst, int64_t n) { dequantize_legacy<BlockQ5_1>(src, dst, n); }
void dequantize_q8_0(const void* src, float* dst, int64_t n) { dequantize_legacy<BlockQ8_0>(src, dst, n); }
void dequantize_q8_1(const void* src, float* dst, int64_t n) {
  const BlockQ8_1* x = blocks<BlockQ8_1>(src);
  for (int64_t i = 0; i < n / 32; ++i) {
    const float d = h2f(x[i].d);
    for (int j = 0; j < 32; ++j) dst[i * 32 + j] = x[i].qs[j] * d;
  }
}
void dequantize_iq4_nl(const void* src, float* dst, int64_t n) { dequantize_legacy<BlockIQ4_NL>(src, dst, n); }

void vec_dot_q4_0(int64_t n, float* result, const void* x, const void* y) {
  // ggml scales this one as (sumi * dx) * dy.
  const BlockQ4_0* bx = blocks<BlockQ4_0>(x);
  const BlockQ8_0* by = blocks<BlockQ8_0>(y);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / 32; ++i) {
    int q[32];
    unpack(bx[i], q);
    int sumi = 0;
    for (int j = 0; j < 32; ++j) sumi += q[j] * by[i].qs[j];
    sum += sumi * h2f(bx[i].d) * h2f(by[i].d);
  }
  *result = sum;
}
void vec_dot_q4_1(int64_t n, float* r, const void* x, const void* y) {
  vec_dot_legacy<BlockQ4_1, BlockQ8_1>(n, r, x, y);
}
void vec_dot_q5_0(int64_t n, float* r, const void* x, const void* y) {
  vec_dot_legacy<BlockQ5_0, BlockQ8_0>(n, r, x, y);
}
void vec_dot_q5_1(int64_t n, float* r, const void* x, const void* y) {
  vec_dot_legacy<BlockQ5_1, BlockQ8_1>(n, r, x, y);
}
void vec_dot_q8_0(int64_t n, float* r, const void* x, const void* y) {
  vec_dot_legacy<BlockQ8_0, BlockQ8_0>(n, r, x, y);
}
void vec_dot_iq4_nl(int64_t n, float* r, const void* x, const void* y) {
  vec_dot_legacy<BlockIQ4_NL, BlockQ8_0>(n, r, x, y);
}

namespace {
// Grouped scratch of 16 rows: row r's bytes [a, a + len) <-> the group's [g, g + len) (a part of one row).
template <bool kToGroup>
void move_part(uint8_t* rows, uint64_t row_bytes, int64_t r, uint64_t at, uint8_t* group, uint64_t g, uint64_t len) {
  uint8_t* row = rows + r * row_bytes + at;
  if (kToGroup)
    std::memcpy(group + g, row, len);
  else
    std::memcpy(row, group + g, len);
}

// A block layout in groups: the block's fields in order, each as `count` parts of `width` bytes, each part the 16
// rows' side by side (16 * width bytes).
struct GroupedField {
  uint64_t offset;  // in the block
  uint64_t width;
  int count;
};
template <bool kToGroup>
void regroup_blocks(uint8_t* rows, uint8_t* group, int64_t nb, uint64_t block_bytes,
                    std::initializer_list<GroupedField> fields) {
  const uint64_t row = nb * block_bytes;
  for (int64_t r = 0; r < 16; ++r)
    for (int64_t b = 0; b < nb; ++b) {
      uint64_t g = b * 16 * block_bytes;
      for (const GroupedField& f : fields)
        for (int k = 0; k < f.count; ++k, g += 16 * f.width)
          move_part<kToGroup>(rows, row, r, b * block_bytes + f.offset + k * f.width, group, g + r * f.width, f.width);
    }
}

// Q4_0: per block, the 16 d, then the 16 bytes of quants as 4 parts of 4.
template <bool kToGroup>
void regroup_q4_0(uint8_t* rows, uint8_t* group, int64_t n) {
  regroup_blocks<kToGroup>(rows, group, n / 32, sizeof(BlockQ4_0),
                           {{offsetof(BlockQ4_0, d), 2, 1}, {offsetof(BlockQ4_0, qs), 4, 4}});
}

// Q8_0: per block, the 16 d, then the 32 bytes of quants as 8 parts of 4 (one stream: docs/performance.md).
template <bool kToGroup>
void regroup_q8_0(uint8_t* rows, uint8_t* group, int64_t n) {
  regroup_blocks<kToGroup>(rows, group, n / 32, sizeof(BlockQ8_0),
                           {{offsetof(BlockQ8_0, d), 2, 1}, {offsetof(BlockQ8_0, qs), 4, 8}});
}

// Q3_K: per super-block, the 16 d, the 12 scale bytes as 3 parts of 4, the 32 hmask bytes as 8 parts of 4 and the
// 64 qs bytes as 16 parts of 4 (Q3KGroup).
template <bool kToGroup>
void regroup_q3_k(uint8_t* rows, uint8_t* group, int64_t n) {
  regroup_blocks<kToGroup>(rows, group, n / kQK_K, sizeof(BlockQ3_K),
                           {{offsetof(BlockQ3_K, d), 2, 1},
                            {offsetof(BlockQ3_K, scales), 4, 3},
                            {offsetof(BlockQ3_K, hmask), 4, 8},
                            {offsetof(BlockQ3_K, qs), 4, 16}});
}
static_assert(Q3KGroup::kScales == 16 * 2 && Q3KGroup::kHmask == Q3KGroup::kScales + 16 * 12 &&
              Q3KGroup::kQs == Q3KGroup::kHmask + 16 * 32);

// IQ4_NL: Q4_0's layout (the same block: d, then 16 quant bytes).
static_assert(sizeof(BlockIQ4_NL) == sizeof(BlockQ4_0) && offsetof(BlockIQ4_NL, qs) == offsetof(BlockQ4_0, qs));
template <bool kToGroup>
void regroup_iq4_nl(uint8_t* rows, uint8_t* group, int64_t n) {
  regroup_q4_0<kToGroup>(rows, group, n);
}

// Q4_1: per block, the 16 d, the 16 m, then the 16 bytes of quants as 4 parts of 4.
template <bool kToGroup>
void regroup_q4_1(uint8_t* rows, uint8_t* group, int64_t n) {
  regroup_blocks<kToGroup>(
      rows, group, n / 32, sizeof(BlockQ4_1),
      {{offsetof(BlockQ4_1, d), 2, 1}, {offsetof(BlockQ4_1, m), 2, 1}, {offsetof(BlockQ4_1, qs), 4, 4}});
}

// Q4_K: per super-block (2304 bytes), the 16 d, the 16 dmin, the 12 scale bytes as 3 parts of 4 and the 128 quant
// bytes as 32 parts of 4.
template <bool kToGroup>
void regroup_q4_k(uint8_t* rows, uint8_t* group, int64_t n) {
  regroup_blocks<kToGroup>(rows, group, n / kQK_K, sizeof(BlockQ4_K),
                           {{offsetof(BlockQ4_K, d), 2, 1},
                            {offsetof(BlockQ4_K, dmin), 2, 1},
                            {offsetof(BlockQ4_K, scales), 4, 3},
                            {offsetof(BlockQ4_K, qs), 4, 32}});
}

// Q2_K: per super-block (1344 bytes), the 16 d, the 16 dmin, the 16 scale bytes as 16 parts of 1 and the 64 quant
// bytes as 16 parts of 4 (Q2KGroup).
template <bool kToGroup>
void regroup_q2_k(uint8_t* rows, uint8_t* group, int64_t n) {
  regroup_blocks<kToGroup>(rows, group, n / kQK_K, sizeof(BlockQ2_K),
                           {{offsetof(BlockQ2_K, d), 2, 1},
                            {offsetof(BlockQ2_K, dmin), 2, 1},
                            {offsetof(BlockQ2_K, scales), 1, 16},
                            {offsetof(BlockQ2_K, qs), 4, 16}});
}

// A grouped tile's reference: each whole group ungrouped, then `dot` per output; the rows after the last whole
// group are in file order.
void grouped_tile(void (*ungroup)(const void*, void*, int64_t), void (*dot)(int64_t, float*, const void*, const void*),
                  int64_t n, int64_t nr, int64_t nt, const void* x, uint64_t x_row, const void* y, uint64_t y_row,
                  float* out, int64_t ldo) {
  const auto* xb = static_cast<const uint8_t*>(x);
  const auto* yb = static_cast<const uint8_t*>(y);
  std::vector<uint8_t> rows(16 * x_row);
  for (int64_t r0 = 0; r0 < nr; r0 += 16) {
    const bool group = r0 + 16 <= nr;
    if (group) ungroup(xb + r0 * x_row, rows.data(), n);
    for (int64_t r = r0; r < std::min(nr, r0 + 16); ++r) {
      const uint8_t* row = group ? rows.data() + (r - r0) * x_row : xb + r * x_row;
      for (int64_t t = 0; t < nt; ++t) dot(n, out + t * ldo + r, row, yb + t * y_row);
    }
  }
}
}  // namespace

// group_rows_T / ungroup_rows_T from regroup_T.
#define TT_ROW_GROUP_LAYOUT(T)                                                                                      \
  void group_rows_##T(const void* rows, void* grouped, int64_t n) {                                                 \
    regroup_##T<true>(const_cast<uint8_t*>(static_cast<const uint8_t*>(rows)), static_cast<uint8_t*>(grouped), n);  \
  }                                                                                                                 \
  void ungroup_rows_##T(const void* grouped, void* rows, int64_t n) {                                               \
    regroup_##T<false>(static_cast<uint8_t*>(rows), const_cast<uint8_t*>(static_cast<const uint8_t*>(grouped)), n); \
  }
TT_ROW_GROUP_LAYOUT(q8_0)
TT_ROW_GROUP_LAYOUT(q4_0)
TT_ROW_GROUP_LAYOUT(q4_1)
TT_ROW_GROUP_LAYOUT(q4_k)
TT_ROW_GROUP_LAYOUT(q2_k)
TT_ROW_GROUP_LAYOUT(q3_k)
TT_ROW_GROUP_LAYOUT(iq4_nl)
#undef TT_ROW_GROUP_LAYOUT

// A grouped tile's reference: grouped_tile with layout T's ungrouping and the file-order kernel DOT.
#define TT_GROUPED_TILE(NAME, T, DOT) \
  TT_TILE_DECL(NAME) { grouped_tile(ungroup_rows_##T, DOT, n, nr, nt, x, x_row, y, y_row, out, ldo); }
TT_GROUPED_TILE(tile_q4_1_rows16, q4_1, vec_dot_q4_1)
TT_GROUPED_TILE(tile_q4_0_rows16, q4_0, repack_dot_q4_0)
TT_GROUPED_TILE(tile_q8_0_rows16, q8_0, vec_dot_q8_0)
TT_GROUPED_TILE(tile_q4_k_rows16_gemv, q4_k, repack_gemv_q4_k)
TT_GROUPED_TILE(tile_q4_k_rows16_gemm, q4_k, repack_gemm_q4_k)
TT_GROUPED_TILE(tile_iq4_nl_rows16, iq4_nl, repack_dot_iq4_nl)
TT_GROUPED_TILE(tile_q2_k_rows16_gemv, q2_k, repack_gemv_q2_k)
TT_GROUPED_TILE(tile_q2_k_rows16_gemm, q2_k, repack_gemm_q2_k)
TT_GROUPED_TILE(tile_q3_k_rows16, q3_k, vec_dot_q3_k)
#undef TT_GROUPED_TILE

void quantize_q4_0(const float* src, void* dst, int64_t n) {
  BlockQ4_0* y = blocks<BlockQ4_0>(dst);
  for (int64_t i = 0; i < n / 32; ++i) {
    const float* x = src + i * 32;
    const float d = signed_absmax(x, 32) / -8;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_q5_0(const float* src, void* dst, int64_t n) {
  BlockQ5_0* y = blocks<BlockQ5_0>(dst);
  for (int64_t i = 0; i < n / 32; ++i) {
    const float* x = src + i * 32;
    const float d = signed_absmax(x, 32) / -16;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
      const int q1 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 16.5f)));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, sizeof(qh));
  }
}

// Q4_1 / Q5_1: d = (max - min) / (2^bits - 1), m = min.
template <typename Block, int kBits>
void quantize_with_min(const float* src, void* dst, int64_t n) {
  Block* y = blocks<Block>(dst);
  constexpr int kMaxQ = (1 << kBits) - 1;
  for (int64_t i = 0; i < n / 32; ++i) {
    const float* x = src + i * 32;
    float min = x[0], max = x[0];
    for (int j = 1; j < 32; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / kMaxQ;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      int q0 = static_cast<int>((x[j] - min) * id + 0.5f);  // truncation, as ggml
      int q1 = static_cast<int>((x[j + 16] - min) * id + 0.5f);
      if constexpr (kBits == 4) {
        q0 = std::min(15, q0);
        q1 = std::min(15, q1);
      } else {
        qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
        qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
      }
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
    }
    if constexpr (kBits == 5) std::memcpy(y[i].qh, &qh, sizeof(qh));
  }
}
void quantize_q4_1(const float* src, void* dst, int64_t n) { quantize_with_min<BlockQ4_1, 4>(src, dst, n); }
void quantize_q5_1(const float* src, void* dst, int64_t n) { quantize_with_min<BlockQ5_1, 5>(src, dst, n); }

// Q8_0 / Q8_1 (ggml's *_ref): d = amax / 127, q = roundf(x / d); Q8_1 also stores s = d * sum(q).
template <typename Block, bool kX86>
void quantize_q8(const float* src, void* dst, int64_t n) {
  Block* y = blocks<Block>(dst);
  for (int64_t i = 0; i < n / 32; ++i) {
    const float* x = src + i * 32;
    const float amax = absmax(x, 32);
    const float d = amax / 127;
    // The reference multiplies by 1/d and rounds half away from zero; ggml's x86 SIMD code multiplies by
    // 127/amax and rounds half to even.
    const float id = kX86 ? (amax != 0.0f ? 127.f / amax : 0.0f) : (d ? 1.0f / d : 0.0f);
    y[i].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const float v = x[j] * id;
      y[i].qs[j] = static_cast<int8_t>(kX86 ? std::nearbyint(v) : std::round(v));
      sum += y[i].qs[j];
    }
    if constexpr (requires { y[i].s; }) y[i].s = fp32_to_fp16(sum * d);
  }
}
void quantize_q8_0(const float* src, void* dst, int64_t n) { quantize_q8<BlockQ8_0, false>(src, dst, n); }
void quantize_q8_1(const float* src, void* dst, int64_t n) { quantize_q8<BlockQ8_1, false>(src, dst, n); }
void quantize_q8_0_x86(const float* src, void* dst, int64_t n) { quantize_q8<BlockQ8_0, true>(src, dst, n); }
void quantize_q8_1_x86(const float* src, void* dst, int64_t n) { quantize_q8<BlockQ8_1, true>(src, dst, n); }

namespace {

// IQ4_NL / IQ4_XS without an importance matrix: ggml's quantize_row_iq4_nl_impl with ntry = 7 (what
// quantize_iq4_nl / quantize_iq4_xs run for model files), block sums weighted by x^2.
void quantize_iq4(const float* x, int super_block, uint16_t* dh, uint8_t* q4, uint16_t* scales_h, uint8_t* scales_l) {
  constexpr int kBlock = 32, kTries = 7;
  const int8_t* values = kValuesIQ4NL;
  float scales[kQK_K / kBlock];
  float weight[kBlock];
  uint8_t L[kQK_K];
  std::memset(q4, 0, super_block / 2);
  *dh = fp32_to_fp16(0.0f);
  float max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < super_block / kBlock; ++ib) {
    const float* xb = x + ib * kBlock;
    uint8_t* Lb = L + ib * kBlock;
    for (int j = 0; j < kBlock; ++j) weight[j] = xb[j] * xb[j];
    float amax = 0, max = 0;
    for (int j = 0; j < kBlock; ++j) {
      const float ax = std::fabs(xb[j]);
      if (ax > amax) {
        amax = ax;
        max = xb[j];
      }
    }
    if (amax < kGroupMaxEps) {
      scales[ib] = 0;
      std::memset(Lb, 0, kBlock);
      continue;
    }
    float d = -max / values[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < kBlock; ++j) {
      const int l = best_index_iq4(id * xb[j]);
      Lb[j] = static_cast<uint8_t>(l);
      const float q = values[l];
      const float w = weight[j];
      sumqx += w * q * xb[j];
      sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -kTries; itry <= kTries; ++itry) {
      id = (itry + values[0]) / max;
      sumqx = sumq2 = 0;
      for (int j = 0; j < kBlock; ++j) {
        const float q = values[best_index_iq4(id * xb[j])];
        const float w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
      }
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
        d = sumqx / sumq2;
        best = d * sumqx;
      }
    }
    scales[ib] = d;
    if (std::fabs(d) > amax_scale) {
      amax_scale = std::fabs(d);
      max_scale = d;
    }
  }
  if (super_block > kBlock) {
    const int nb = super_block / kBlock;
    std::memset(scales_h, 0, (nb + 7) / 8 * sizeof(uint16_t));
    const float d = -max_scale / 32;
    *dh = fp32_to_fp16(d);
    const float id = d ? 1 / d : 0.f;
    for (int ib = 0; ib < nb; ++ib) {
      int l = nearest_int(id * scales[ib]);
      l = std::max(-32, std::min(31, l));
      const float dl = d * l;
      const float idl = dl ? 1 / dl : 0.f;
      for (int j = 0; j < kBlock; ++j)
        L[ib * kBlock + j] = static_cast<uint8_t>(best_index_iq4(idl * x[ib * kBlock + j]));
      l += 32;
      const uint8_t l_l = l & 0xF, l_h = static_cast<uint8_t>(l >> 4);
      if (ib % 2 == 0)
        scales_l[ib / 2] = l_l;
      else
        scales_l[ib / 2] |= static_cast<uint8_t>(l_l << 4);
      scales_h[ib / 8] |= static_cast<uint16_t>(l_h << 2 * (ib % 8));
    }
  } else {
    *dh = fp32_to_fp16(scales[0]);
    const float id = scales[0] ? 1 / scales[0] : 0;
    for (int j = 0; j < super_block; ++j) L[j] = static_cast<uint8_t>(best_index_iq4(id * x[j]));
  }
  for (int i = 0; i < super_block / 32; ++i)
    for (int j = 0; j < 16; ++j) q4[16 * i + j] = static_cast<uint8_t>(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

}  // namespace

void quantize_iq4_nl(const float* src, void* dst, int64_t n) {
  BlockIQ4_NL* y = blocks<BlockIQ4_NL>(dst);
  for (int64_t i = 0; i < n / kQK4_NL; ++i)
    quantize_iq4(src + i * kQK4_NL, kQK4_NL, &y[i].d, y[i].qs, nullptr, nullptr);
}

void quantize_iq4_xs(const float* src, void* dst, int64_t n) {
  BlockIQ4_XS* y = blocks<BlockIQ4_XS>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i)
    quantize_iq4(src + i * kQK_K, kQK_K, &y[i].d, y[i].qs, &y[i].scales_h, y[i].scales_l);
}

// ================================ K-quants

void quantize_q8_k(const float* src, void* dst, int64_t n) {
  BlockQ8_K* y = blocks<BlockQ8_K>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float* x = src + i * kQK_K;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(y[i]));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j) y[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int j = 0; j < kQK_K / 16; ++j) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[j * 16 + l];
      y[i].bsums[j] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

void dequantize_q8_k(const void* src, float* dst, int64_t n) {
  const BlockQ8_K* x = blocks<BlockQ8_K>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    for (int j = 0; j < kQK_K; ++j) dst[i * kQK_K + j] = x[i].d * x[i].qs[j];
  }
}

void dequantize_q2_k(const void* src, float* dst, int64_t n) {
  const BlockQ2_K* x = blocks<BlockQ2_K>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = h2f(x[i].d), dmin = h2f(x[i].dmin);
    float* y = dst + i * kQK_K;
    // Element e: 128-half h, 2-bit plane s, 16-group g within the 32 bytes.
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, s = (e % 128) / 32, l = e % 32;
      const uint8_t sc = x[i].scales[e / 16];
      const int q = (x[i].qs[h * 32 + l] >> (2 * s)) & 3;
      y[e] = d * (sc & 0xF) * q - dmin * (sc >> 4);
    }
  }
}

void vec_dot_q2_k(int64_t n, float* result, const void* vx, const void* vy) {
  const BlockQ2_K* x = blocks<BlockQ2_K>(vx);
  const BlockQ8_K* y = blocks<BlockQ8_K>(vy);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int summs = 0;
    for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (x[i].scales[j] >> 4);
    const float dall = y[i].d * h2f(x[i].d);
    const float dmin = y[i].d * h2f(x[i].dmin);
    int isum = 0;
    for (int g = 0; g < 16; ++g) {  // 16-element groups in element order
      const int h = g / 8, s = (g % 8) / 2, off = (g % 2) * 16;
      int isuml = 0;
      for (int l = 0; l < 16; ++l) isuml += y[i].qs[g * 16 + l] * ((x[i].qs[h * 32 + off + l] >> (2 * s)) & 3);
      isum += (x[i].scales[g] & 0xF) * isuml;
    }
    sum += dall * isum - dmin * summs;
  }
  *result = sum;
}

void dequantize_q3_k(const void* src, float* dst, int64_t n) {
  const BlockQ3_K* x = blocks<BlockQ3_K>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = h2f(x[i].d);
    int8_t scales[16], a[kQK_K];
    unpack_q3_k_scales(x[i].scales, scales);
    unpack_q3_k(x[i], a);
    for (int e = 0; e < kQK_K; ++e) dst[i * kQK_K + e] = d * scales[e / 16] * a[e];
  }
}

void vec_dot_q3_k(int64_t n, float* result, const void* vx, const void* vy) {
  const BlockQ3_K* x = blocks<BlockQ3_K>(vx);
  const BlockQ8_K* y = blocks<BlockQ8_K>(vy);
  LaneSums acc;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t sc8[16], a[kQK_K];
    int scales[16];
    unpack_q3_k_scales(x[i].scales, sc8);
    for (int j = 0; j < 16; ++j) scales[j] = sc8[j];
    unpack_q3_k(x[i], a);
    accumulate_lanes(a, y[i].qs, scales, 16, h2f(x[i].d) * y[i].d, acc);
  }
  *result = acc.total();
}

template <typename Block>
void dequantize_q45_k(const void* src, float* dst, int64_t n) {
  const Block* x = blocks<Block>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = h2f(x[i].d), dmin = h2f(x[i].dmin);
    int scales[8], mins[8];
    int8_t a[kQK_K];
    unpack_k4_scales(x[i].scales, scales, mins);
    unpack_q45_k(x[i], a);
    for (int e = 0; e < kQK_K; ++e) {
      const float d1 = d * scales[e / 32], m1 = dmin * mins[e / 32];
      dst[i * kQK_K + e] = d1 * a[e] - m1;
    }
  }
}
void dequantize_q4_k(const void* src, float* dst, int64_t n) { dequantize_q45_k<BlockQ4_K>(src, dst, n); }
void dequantize_q5_k(const void* src, float* dst, int64_t n) { dequantize_q45_k<BlockQ5_K>(src, dst, n); }

template <typename Block>
void vec_dot_q45_k(int64_t n, float* result, const void* vx, const void* vy) {
  const Block* x = blocks<Block>(vx);
  const BlockQ8_K* y = blocks<BlockQ8_K>(vy);
  LaneSums acc;
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int scales[8], mins[8];
    int8_t a[kQK_K];
    unpack_k4_scales(x[i].scales, scales, mins);
    unpack_q45_k(x[i], a);
    int sumi = 0;
    for (int j = 0; j < 16; ++j) sumi += y[i].bsums[j] * mins[j / 2];
    accumulate_lanes(a, y[i].qs, scales, 32, h2f(x[i].d) * y[i].d, acc);
    sum -= h2f(x[i].dmin) * y[i].d * sumi;
  }
  for (float v : acc.sums) sum += v;
  *result = sum;
}
void vec_dot_q4_k(int64_t n, float* r, const void* x, const void* y) { vec_dot_q45_k<BlockQ4_K>(n, r, x, y); }
void vec_dot_q5_k(int64_t n, float* r, const void* x, const void* y) { vec_dot_q45_k<BlockQ5_K>(n, r, x, y); }

void dequantize_q6_k(const void* src, float* dst, int64_t n) {
  const BlockQ6_K* x = blocks<BlockQ6_K>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = h2f(x[i].d);
    int8_t a[kQK_K];
    unpack_q6_k(x[i], a);
    for (int e = 0; e < kQK_K; ++e) dst[i * kQK_K + e] = d * x[i].scales[e / 16] * a[e];
  }
}

void vec_dot_q6_k(int64_t n, float* result, const void* vx, const void* vy) {
  const BlockQ6_K* x = blocks<BlockQ6_K>(vx);
  const BlockQ8_K* y = blocks<BlockQ8_K>(vy);
  LaneSums acc;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t a[kQK_K];
    int scales[16];
    unpack_q6_k(x[i], a);
    for (int j = 0; j < 16; ++j) scales[j] = x[i].scales[j];
    accumulate_lanes(a, y[i].qs, scales, 16, h2f(x[i].d) * y[i].d, acc);
  }
  *result = acc.total();
}

void dequantize_iq4_xs(const void* src, float* dst, int64_t n) {
  const BlockIQ4_XS* x = blocks<BlockIQ4_XS>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = h2f(x[i].d);
    for (int ib = 0; ib < 8; ++ib) {
      const float dl = d * iq4_xs_scale(x[i], ib);
      const uint8_t* qs = x[i].qs + 16 * ib;
      float* y = dst + i * kQK_K + 32 * ib;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * kValuesIQ4NL[qs[j] & 0xF];
        y[j + 16] = dl * kValuesIQ4NL[qs[j] >> 4];
      }
    }
  }
}

void vec_dot_iq4_xs(int64_t n, float* result, const void* vx, const void* vy) {
  const BlockIQ4_XS* x = blocks<BlockIQ4_XS>(vx);
  const BlockQ8_K* y = blocks<BlockQ8_K>(vy);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d4d8 = h2f(x[i].d) * y[i].d;
    for (int ib = 0; ib < 8; ++ib) {
      const uint8_t* qs = x[i].qs + 16 * ib;
      const int8_t* q8 = y[i].qs + 32 * ib;
      int sumi = 0;
      for (int j = 0; j < 16; ++j) sumi += q8[j] * kValuesIQ4NL[qs[j] & 0xF] + q8[j + 16] * kValuesIQ4NL[qs[j] >> 4];
      sum += (d4d8 * iq4_xs_scale(x[i], ib)) * sumi;
    }
  }
  *result = sum;
}

// ================================ K-quant weight quantizers: ggml's quantize_row_q*_K_ref (what llama-quantize
// runs without an importance matrix), operation for operation so the bytes match.

namespace {

// The element of largest magnitude, signed (the first of equal magnitudes), as ggml's quantizers find it.
float signed_max(const float* x, int n) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  return max;
}

// make_qx_quants with rmse_type 1 and no importance weights (w = x^2): signed levels -nmax..nmax-1, scale
// refined over 18 trial inverse scales. L gets level + nmax.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_max(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// make_q3_quants with do_rmse: levels -nmax..nmax-1 improved one element at a time (up to 5 passes).
float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_max(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx > 0) {
        float sl2 = suml2 - w * L[i] * L[i];
        int new_l = nearest_int(x[i] * sl2 / slx);
        new_l = std::max(-nmax, std::min(nmax - 1, new_l));
        if (new_l != L[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// make_qkx2_quants: levels 0..nmax of (x - min) / scale with min <= 0, the scale and min refit by weighted least
// squares over nstep + 1 trial inverse scales. Returns the scale; *the_min = -min.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min, uint8_t* Laux,
                       float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * L[i] + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// 2-bit planes of 128 elements: byte l of each 32 holds elements l, l+32, l+64, l+96.
void pack_2bit_planes(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK_K; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] =
          static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

// Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins (make_qkx2_quants with the type's search).
template <typename Block, int kMaxQ>
void quantize_q45_k(const float* x, void* dst, int64_t n, float rmin, float rdelta, int nstep) {
  Block* y = blocks<Block>(dst);
  uint8_t L[kQK_K], Laux[32];
  float weights[32], mins[kQK_K / 32], scales[kQK_K / 32];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < kQK_K / 32; ++j) {
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
      scales[j] =
          make_qkx2_quants(32, kMaxQ, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep, false);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < kQK_K / 32; ++j) {
      uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
      uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
      ls = std::min<uint8_t>(63, ls);
      lm = std::min<uint8_t>(63, lm);
      if (j < 4) {
        y[i].scales[j] = ls;
        y[i].scales[j + 4] = lm;
      } else {
        y[i].scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
        y[i].scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
        y[i].scales[j - 0] |= static_cast<uint8_t>((lm >> 4) << 6);
      }
    }
    y[i].d = fp32_to_fp16(max_scale / 63.f);
    y[i].dmin = fp32_to_fp16(max_min / 63.f);
    for (int j = 0; j < kQK_K / 32; ++j) {
      uint8_t sc, m;
      get_scale_min_k4(j, y[i].scales, &sc, &m);
      const float d = h2f(y[i].d) * sc;
      if (!d) continue;
      const float dm = h2f(y[i].dmin) * m;
      for (int ii = 0; ii < 32; ++ii) {
        const int l = nearest_int((x[32 * j + ii] + dm) / d);
        L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(kMaxQ, l)));
      }
    }
    if constexpr (kMaxQ == 15) {
      uint8_t* q = y[i].qs;
      for (int j = 0; j < kQK_K; j += 64, q += 32)
        for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    } else {
      uint8_t* qh = y[i].qh;
      uint8_t* ql = y[i].qs;
      std::memset(qh, 0, kQK_K / 8);
      uint8_t m1 = 1, m2 = 2;
      for (int j = 0; j < kQK_K; j += 64, ql += 32) {
        for (int l = 0; l < 32; ++l) {
          int l1 = L[j + l], l2 = L[j + l + 32];
          if (l1 > 15) {
            l1 -= 16;
            qh[l] |= m1;
          }
          if (l2 > 15) {
            l2 -= 16;
            qh[l] |= m2;
          }
          ql[l] = static_cast<uint8_t>(l1 | (l2 << 4));
        }
        m1 = static_cast<uint8_t>(m1 << 2);
        m2 = static_cast<uint8_t>(m2 << 2);
      }
    }
  }
}

}  // namespace

void quantize_q2_k(const float* x, void* dst, int64_t n) {
  BlockQ2_K* y = blocks<BlockQ2_K>(dst);
  uint8_t L[kQK_K], Laux[16];
  float weights[16], mins[kQK_K / 16], scales[kQK_K / 16];
  const float q4scale = 15.f;
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < kQK_K / 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
      const float iscale = q4scale / max_scale;
      for (int j = 0; j < kQK_K / 16; ++j) y[i].scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      y[i].d = fp32_to_fp16(max_scale / q4scale);
    } else {
      for (int j = 0; j < kQK_K / 16; ++j) y[i].scales[j] = 0;
      y[i].d = fp32_to_fp16(0.f);
    }
    if (max_min > 0) {
      const float iscale = q4scale / max_min;
      for (int j = 0; j < kQK_K / 16; ++j) y[i].scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
      y[i].dmin = fp32_to_fp16(max_min / q4scale);
    } else {
      y[i].dmin = fp32_to_fp16(0.f);
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = h2f(y[i].d) * (y[i].scales[j] & 0xF);
      if (!d) continue;
      const float dm = h2f(y[i].dmin) * (y[i].scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int((x[16 * j + ii] + dm) / d);
        L[16 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(3, l)));
      }
    }
    pack_2bit_planes(L, y[i].qs);
  }
}

void quantize_q3_k(const float* x, void* dst, int64_t n) {
  BlockQ3_K* y = blocks<BlockQ3_K>(dst);
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max_scale = 0, amax = 0;
    for (int j = 0; j < kQK_K / 16; ++j) {
      scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
      const float scale = std::fabs(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }
    std::memset(y[i].scales, 0, 12);
    if (max_scale) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < kQK_K / 16; ++j) {
        int8_t l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
        l = static_cast<int8_t>(std::max<int>(-32, std::min<int>(31, l)) + 32);
        if (j < 8)
          y[i].scales[j] = l & 0xF;
        else
          y[i].scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
        l = static_cast<int8_t>(l >> 4);
        y[i].scales[j % 4 + 8] |= static_cast<uint8_t>(l << (2 * (j / 4)));
      }
      y[i].d = fp32_to_fp16(1 / iscale);
    } else {
      y[i].d = fp32_to_fp16(0.f);
    }
    int8_t sc[16];
    unpack_q3_k_scales(y[i].scales, sc);
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = h2f(y[i].d) * sc[j];
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<int8_t>(std::max(-4, std::min(3, l)) + 4);
      }
    }
    std::memset(y[i].hmask, 0, kQK_K / 8);
    // The high bit of element j goes to bit j / 32 of hmask[j % 32].
    int m = 0;
    uint8_t hm = 1;
    for (int j = 0; j < kQK_K; ++j) {
      if (L[j] > 3) {
        y[i].hmask[m] |= hm;
        L[j] = static_cast<int8_t>(L[j] - 4);
      }
      if (++m == kQK_K / 8) {
        m = 0;
        hm = static_cast<uint8_t>(hm << 1);
      }
    }
    pack_2bit_planes(reinterpret_cast<const uint8_t*>(L), y[i].qs);
  }
}

void quantize_q4_k(const float* src, void* dst, int64_t n) {
  quantize_q45_k<BlockQ4_K, 15>(src, dst, n, -1.f, 0.1f, 20);
}
void quantize_q5_k(const float* src, void* dst, int64_t n) {
  quantize_q45_k<BlockQ5_K, 31>(src, dst, n, -0.5f, 0.1f, 15);
}

void quantize_q6_k(const float* x, void* dst, int64_t n) {
  BlockQ6_K* y = blocks<BlockQ6_K>(dst);
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
      scales[ib] = scale;
      if (std::fabs(scale) > max_abs_scale) {
        max_abs_scale = std::fabs(scale);
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(y[i]));
      y[i].d = fp32_to_fp16(0.f);
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = fp32_to_fp16(1 / iscale);
    for (int ib = 0; ib < kQK_K / 16; ++ib)
      y[i].scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = h2f(y[i].d) * y[i].scales[j];
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<int8_t>(std::max(-32, std::min(31, l)) + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF, q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
        ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                     ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace tt::ref
