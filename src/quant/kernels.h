// Internal: the kernel functions behind the kernel table (quant.cpp), per implementation: the scalar references
// (namespace ref) and one namespace per instruction set with the same names. Only src/quant and the quant tests
// include this; the engine goes through quant.h.
#pragma once

#include <cstdint>

#include "quant/attend.h"

namespace tt {

#define TT_VEC_DOT_DECL(name) void name(int64_t n, float* result, const void* x, const void* y)
// A tile of a matrix product (see TileFn in quant.h).
#define TT_TILE_DECL(name)                                                                                   \
  void name(int64_t n, int64_t nr, int64_t nt, const void* x, uint64_t x_row, const void* y, uint64_t y_row, \
            float* out, int64_t ldo)

// Scalar references (reference.cpp): compute the way ggml's generic C kernels do.
namespace ref {
TT_VEC_DOT_DECL(vec_dot_f32);
TT_VEC_DOT_DECL(vec_dot_f16);
TT_VEC_DOT_DECL(vec_dot_bf16);
// llama.cpp's BF16 orders on AVX512-BF16 machines (VDPBF16PS): ggml_vec_dot_bf16 and tinyBLAS (n % 32 == 0).
TT_VEC_DOT_DECL(vec_dot_bf16_avx512bf16);
TT_VEC_DOT_DECL(dot_bf16_tinyblas);
TT_VEC_DOT_DECL(vec_dot_q4_0);
TT_VEC_DOT_DECL(vec_dot_q4_1);
TT_VEC_DOT_DECL(vec_dot_q5_0);
TT_VEC_DOT_DECL(vec_dot_q5_1);
TT_VEC_DOT_DECL(vec_dot_q8_0);
TT_VEC_DOT_DECL(vec_dot_q2_k);
TT_VEC_DOT_DECL(vec_dot_q3_k);
TT_VEC_DOT_DECL(vec_dot_q4_k);
TT_VEC_DOT_DECL(vec_dot_q5_k);
TT_VEC_DOT_DECL(vec_dot_q6_k);
TT_VEC_DOT_DECL(vec_dot_iq4_nl);
TT_VEC_DOT_DECL(vec_dot_iq4_xs);

void dequantize_f32(const void* src, float* dst, int64_t n);
void dequantize_f16(const void* src, float* dst, int64_t n);
void dequantize_bf16(const void* src, float* dst, int64_t n);
void dequantize_q4_0(const void* src, float* dst, int64_t n);
void dequantize_q4_1(const void* src, float* dst, int64_t n);
void dequantize_q5_0(const void* src, float* dst, int64_t n);
void dequantize_q5_1(const void* src, float* dst, int64_t n);
void dequantize_q8_0(const void* src, float* dst, int64_t n);
void dequantize_q8_1(const void* src, float* dst, int64_t n);
void dequantize_q2_k(const void* src, float* dst, int64_t n);
void dequantize_q3_k(const void* src, float* dst, int64_t n);
void dequantize_q4_k(const void* src, float* dst, int64_t n);
void dequantize_q5_k(const void* src, float* dst, int64_t n);
void dequantize_q6_k(const void* src, float* dst, int64_t n);
void dequantize_q8_k(const void* src, float* dst, int64_t n);
void dequantize_iq4_nl(const void* src, float* dst, int64_t n);
void dequantize_iq4_xs(const void* src, float* dst, int64_t n);

void quantize_f32(const float* src, void* dst, int64_t n);
void quantize_f16(const float* src, void* dst, int64_t n);
void quantize_bf16(const float* src, void* dst, int64_t n);
void quantize_q4_0(const float* src, void* dst, int64_t n);
void quantize_q4_1(const float* src, void* dst, int64_t n);
void quantize_q5_0(const float* src, void* dst, int64_t n);
void quantize_q5_1(const float* src, void* dst, int64_t n);
void quantize_q8_0(const float* src, void* dst, int64_t n);
void quantize_q8_1(const float* src, void* dst, int64_t n);
void quantize_q8_k(const float* src, void* dst, int64_t n);
void quantize_iq4_nl(const float* src, void* dst, int64_t n);
// Weight-only quantizers (llama.cpp's *_ref algorithms, what llama-quantize runs without an importance matrix).
void quantize_q2_k(const float* src, void* dst, int64_t n);
void quantize_q3_k(const float* src, void* dst, int64_t n);
void quantize_q4_k(const float* src, void* dst, int64_t n);
void quantize_q5_k(const float* src, void* dst, int64_t n);
void quantize_q6_k(const float* src, void* dst, int64_t n);
void quantize_iq4_xs(const float* src, void* dst, int64_t n);

// Rows of halves (core/fp16.h's conversions one element at a time).
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);

// As ggml's x86 SIMD quantizers compute (scale 127/amax, round half to even) -- what llama.cpp feeds its dot
// products on this kind of machine. Scalar code; the SIMD versions below give identical bytes.
void quantize_q8_0_x86(const float* src, void* dst, int64_t n);
void quantize_q8_1_x86(const float* src, void* dst, int64_t n);

// llama.cpp's x86 repacked-weight kernels, one weight row at a time (repack.cpp): "gemv" for single tokens,
// "gemm" for tokens in groups of 4.
TT_VEC_DOT_DECL(repack_dot_q4_0);  // gemv and gemm
TT_VEC_DOT_DECL(repack_dot_iq4_nl);
TT_VEC_DOT_DECL(repack_gemv_q4_k);
TT_VEC_DOT_DECL(repack_gemm_q4_k);
TT_VEC_DOT_DECL(repack_gemv_q2_k);
TT_VEC_DOT_DECL(repack_gemm_q2_k);
// llama.cpp's AMX kernels' order for Q8_0 (one FMA per 32-block, as repack_dot_q4_0): the batched prompt path
// where the CPU has AMX-INT8.
TT_VEC_DOT_DECL(amx_dot_q8_0);

// Rows in groups of 16 (RowGroups, quant.h): the layouts (reference.cpp), and their tiles as each group ungrouped
// and the file-order kernel per output: Q8_0's and Q4_1's vec_dot; Q4_0's and Q4_K's repacked kernels.
void group_rows_q8_0(const void* rows, void* grouped, int64_t n);
void group_rows_q4_0(const void* rows, void* grouped, int64_t n);
void ungroup_rows_q4_0(const void* grouped, void* rows, int64_t n);
void ungroup_rows_q8_0(const void* grouped, void* rows, int64_t n);
void group_rows_q4_k(const void* rows, void* grouped, int64_t n);
void group_rows_q4_1(const void* rows, void* grouped, int64_t n);
void ungroup_rows_q4_1(const void* grouped, void* rows, int64_t n);
void ungroup_rows_q4_k(const void* grouped, void* rows, int64_t n);
void group_rows_q2_k(const void* rows, void* grouped, int64_t n);
void group_rows_iq4_nl(const void* rows, void* grouped, int64_t n);
void ungroup_rows_iq4_nl(const void* grouped, void* rows, int64_t n);
void ungroup_rows_q2_k(const void* grouped, void* rows, int64_t n);
void group_rows_q3_k(const void* rows, void* grouped, int64_t n);
void ungroup_rows_q3_k(const void* grouped, void* rows, int64_t n);
TT_TILE_DECL(tile_q8_0_rows16);
TT_TILE_DECL(tile_q4_0_rows16);
TT_TILE_DECL(tile_q4_1_rows16);
TT_TILE_DECL(tile_q4_k_rows16_gemv);
TT_TILE_DECL(tile_q4_k_rows16_gemm);
TT_TILE_DECL(tile_q2_k_rows16_gemv);
TT_TILE_DECL(tile_q2_k_rows16_gemm);
TT_TILE_DECL(tile_q3_k_rows16);
TT_TILE_DECL(tile_iq4_nl_rows16);

// Flash attention over an F16 cache, as llama.cpp computes it: K.Q as products of halves summed in double in
// element order; V accumulated in halves (acc = f16(fma(v, s, acc))), rescaled in halves (acc = f16(acc * s)).
// Measured, not assumed: llama.cpp's AVX-512 ggml_vec_dot_f16 would sum 64-element steps in four 16-lane float
// accumulators, but only the double sum reproduces the reference logits bit for bit for the head_dim-64 models
// (synth-llama-512/768, synth-qwen2), whose head_dim is the first to reach that SIMD path.
float dot_f16_double(const uint16_t* x, const uint16_t* y, int64_t n);
void mad_f16(uint16_t* acc, const uint16_t* v, float s, int64_t n);
void scale_f16(uint16_t* acc, float s, int64_t n);
TT_ATTEND_F16_DECL(attend_f16);

// The same in the order of llama.cpp's build for an AVX-512 CPU without FP16 (LlamaCppBuild::kAmdAvx512, quant.h):
// K.Q as ggml_vec_dot_f16's 64-element SIMD steps (vec_dot_f16_simd64); V as above.
float dot_f16_simd64(const uint16_t* x, const uint16_t* y, int64_t n);
TT_ATTEND_F16_DECL(attend_f16_simd64);
// llama.cpp's tiled flash attention for batches of kTileRows tokens or more (attend.h), element by element.
TT_ATTEND_TILED_DECL(attend_tiled);
// ggml_vec_dot_f16 on AVX-512 (kAmdAvx512): 64-element steps in four 16-lane FMA accumulators, reduced
// (a0 + a2) + (a1 + a3) and by _mm512_reduce_add_ps's tree; the tail (all of it when n < 64) summed in double.
TT_VEC_DOT_DECL(vec_dot_f16_simd64);
// llamafile's tinyBLAS for F16 on AVX-512 (kAmdAvx512 batches): one 16-lane FMA accumulator over the row, then
// _mm512_reduce_add_ps's tree. n: a multiple of 16.
TT_VEC_DOT_DECL(dot_f16_tinyblas);

// ggml_vec_swiglu_f32 as llama.cpp runs it here: out = g / (1 + exp(-g)) * u, exp as ggml's AVX-512 ggml_v_expf
// over the first n - n % 16 elements, libm expf for the rest.
void swiglu_row(const float* g, const float* u, float* out, int64_t n);

// ggml_vec_soft_max_f32 + scale as llama.cpp's AVX-512 build runs a row without mask: exp(x - max) by ggml_v_expf
// over 16-element chunks, each chunk's sum by _mm512_reduce_add_ps's tree added in double; libm expf for the
// tail; then every element times (float)(1 / sum).
void soft_max_row(const float* x, float* out, int64_t n);

// Rotary embedding of one head's first n_dims elements (in may equal out): pair (a, b) = (i, i + 1), or
// (i/2, i/2 + n_dims/2) in NeoX mode, turned by cos_sin[i], cos_sin[i + 1] for i = 0, 2, ...:
//   out[a] = fma(x_a, cos, -(x_b * sin)), out[b] = fma(x_a, sin, x_b * cos)
// as llama.cpp's -march=native build contracts ggml's rope lines.
void rope_rotate(const float* in, float* out, const float* cos_sin, int n_dims, bool neox);
}  // namespace ref

// Fast paths, one namespace per instruction set (files *_avx2.cpp / *_avx512.cpp). Every function here has the
// reference's signature and semantics.
#define TT_FAST_KERNELS_DECL                                              \
  TT_VEC_DOT_DECL(vec_dot_f32);                                           \
  TT_VEC_DOT_DECL(vec_dot_f16);                                           \
  TT_VEC_DOT_DECL(vec_dot_q4_0);                                          \
  TT_VEC_DOT_DECL(vec_dot_q4_1);                                          \
  TT_VEC_DOT_DECL(vec_dot_q5_0);                                          \
  TT_VEC_DOT_DECL(vec_dot_q5_1);                                          \
  TT_VEC_DOT_DECL(vec_dot_q8_0);                                          \
  TT_VEC_DOT_DECL(vec_dot_iq4_nl);                                        \
  TT_VEC_DOT_DECL(vec_dot_q2_k);                                          \
  TT_VEC_DOT_DECL(vec_dot_q3_k);                                          \
  TT_VEC_DOT_DECL(vec_dot_q4_k);                                          \
  TT_VEC_DOT_DECL(vec_dot_q5_k);                                          \
  TT_VEC_DOT_DECL(vec_dot_q6_k);                                          \
  TT_VEC_DOT_DECL(vec_dot_iq4_xs);                                        \
  void quantize_q8_0_x86(const float* src, void* dst, int64_t n);         \
  void quantize_q8_1_x86(const float* src, void* dst, int64_t n);         \
  void quantize_q8_k(const float* src, void* dst, int64_t n);             \
  void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);      \
  void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);      \
  TT_VEC_DOT_DECL(repack_dot_q4_0);                                       \
  TT_VEC_DOT_DECL(repack_dot_iq4_nl);                                     \
  TT_VEC_DOT_DECL(repack_gemv_q4_k);                                      \
  TT_VEC_DOT_DECL(repack_gemm_q4_k);                                      \
  TT_VEC_DOT_DECL(repack_gemv_q2_k);                                      \
  TT_VEC_DOT_DECL(repack_gemm_q2_k);                                      \
  float dot_f16_double(const uint16_t* x, const uint16_t* y, int64_t n);  \
  void mad_f16(uint16_t* acc, const uint16_t* v, float s, int64_t n);     \
  void scale_f16(uint16_t* acc, float s, int64_t n);                      \
  TT_ATTEND_F16_DECL(attend_f16);                                         \
  TT_ATTEND_F16_DECL(attend_f16_simd64);                                  \
  TT_VEC_DOT_DECL(vec_dot_f16_simd64);                                    \
  TT_VEC_DOT_DECL(dot_f16_tinyblas);                                      \
  TT_ATTEND_TILED_DECL(attend_tiled);                                     \
  TT_TILE_DECL(tile_q8_0);                                                \
  TT_TILE_DECL(tile_q5_0);                                                \
  TT_TILE_DECL(tile_q4_1);                                                \
  TT_TILE_DECL(tile_q5_1);                                                \
  TT_TILE_DECL(tile_q6_k);                                                \
  TT_TILE_DECL(tile_iq4_xs);                                              \
  TT_TILE_DECL(tile_q3_k);                                                \
  TT_TILE_DECL(tile_q5_k);                                                \
  TT_TILE_DECL(tile_repack_q4_0);                                         \
  TT_TILE_DECL(tile_repack_iq4_nl);                                       \
  TT_TILE_DECL(tile_repack_gemv_q4_k);                                    \
  TT_TILE_DECL(tile_repack_gemm_q4_k);                                    \
  TT_TILE_DECL(tile_q4_k_rows16_gemv);                                    \
  void swiglu_row(const float* g, const float* u, float* out, int64_t n); \
  void expf_libm_row(const float* x, float* y, int64_t n);                \
  void rope_rotate(const float* in, float* out, const float* cos_sin, int n_dims, bool neox)

namespace avx2 {
TT_FAST_KERNELS_DECL;
// llama.cpp's BF16 orders on VDPBF16PS, emulated (the records' llama.cpp builds had the instruction).
TT_VEC_DOT_DECL(vec_dot_bf16_dp);     // ref::vec_dot_bf16_avx512bf16
TT_VEC_DOT_DECL(dot_bf16_tinyblas);   // ref::dot_bf16_tinyblas
TT_TILE_DECL(tile_f32);               // vec_dot_f32 per (row, token)
TT_TILE_DECL(tile_f16);               // vec_dot_f16 per (row, token)
TT_TILE_DECL(tile_bf16_dp);           // ref::vec_dot_bf16_avx512bf16 per (row, token)
TT_TILE_DECL(tile_bf16_tinyblas);     // ref::dot_bf16_tinyblas per (row, token)
TT_TILE_DECL(tile_f16_tinyblas);      // ref::dot_f16_tinyblas per (row, token)
TT_TILE_DECL(tile_q4_k_rows16_gemm);  // ref::tile_q4_k_rows16_gemm
TT_TILE_DECL(tile_q4_0_rows16);       // ref::tile_q4_0_rows16
}  // namespace avx2
namespace avx512 {  // AVX-512 F/BW/VL/DQ + VNNI
TT_FAST_KERNELS_DECL;
TT_TILE_DECL(tile_f16);               // vec_dot_f16 per (row, token)
TT_TILE_DECL(tile_q8_0_rows16);       // ref::tile_q8_0_rows16: rows in groups of 16 (RowGroups)
TT_TILE_DECL(tile_q4_1_rows16);       // ref::tile_q4_1_rows16
TT_TILE_DECL(tile_q4_k_rows16_gemm);  // ref::tile_q4_k_rows16_gemm
TT_TILE_DECL(tile_q4_0_rows16);       // ref::tile_q4_0_rows16
TT_TILE_DECL(tile_iq4_nl_rows16);     // ref::tile_iq4_nl_rows16
TT_TILE_DECL(tile_q2_k_rows16_gemv);  // ref::tile_q2_k_rows16_gemv
TT_TILE_DECL(tile_q2_k_rows16_gemm);  // ref::tile_q2_k_rows16_gemm
TT_TILE_DECL(tile_q3_k_rows16);       // ref::tile_q3_k_rows16
}  // namespace avx512
// VDPBF16PS (files *_avx512bf16.cpp, compiled for AVX-512 + BF16): llama.cpp's BF16 orders on the instruction it
// ran them with. Only called where the CPU has AVX512-BF16.
namespace avx512bf16 {
TT_VEC_DOT_DECL(vec_dot_bf16);       // ref::vec_dot_bf16_avx512bf16
TT_VEC_DOT_DECL(dot_bf16_tinyblas);  // ref::dot_bf16_tinyblas
TT_TILE_DECL(tile_bf16_tinyblas);    // ref::dot_bf16_tinyblas per (row, token)
}  // namespace avx512bf16
// AMX-INT8 tiles (files *_amx.cpp, compiled for AVX-512 + AMX). Only called where amx_available() (quant.h);
// each kernel loads its own tile configuration.
namespace amx {
TT_TILE_DECL(tile_q8_0);              // ref::amx_dot_q8_0 per (row, token)
TT_TILE_DECL(tile_repack_q4_0);       // ref::repack_dot_q4_0 per (row, token)
TT_TILE_DECL(tile_repack_iq4_nl);     // ref::repack_dot_iq4_nl per (row, token)
TT_TILE_DECL(tile_repack_gemm_q4_k);  // ref::repack_gemm_q4_k per (row, token)
TT_TILE_DECL(tile_repack_gemm_q2_k);  // ref::repack_gemm_q2_k per (row, token)
TT_TILE_DECL(tile_q4_k_rows16_gemm);  // ref::tile_q4_k_rows16_gemm
TT_TILE_DECL(tile_q5_k);              // avx512::vec_dot_q5_k per (row, token)
TT_TILE_DECL(tile_q6_k);              // avx512::vec_dot_q6_k per (row, token)
TT_TILE_DECL(tile_iq4_xs);            // avx512::vec_dot_iq4_xs per (row, token)
}  // namespace amx

}  // namespace tt
