// Kernels per element type: one table, like ggml's type traits. Every type has a scalar reference (the oracle in
// tests) and may have a fast path chosen at run time for the CPU (AVX2, AVX-512, AVX-512 VNNI).
//
// Matrix products follow llama.cpp: activations are first converted to the weight type's `vec_dot_type`
// (Q8_0 / Q8_1 / Q8_K blocks for quantized weights, F16 for F16 weights, F32 for F32 ...), then each output is
// a dot product of one weight row with one converted activation row. Doing the same as llama.cpp is what makes
// logits agree within the reference tolerance.
#pragma once

#include <cstdint>
#include <string_view>

#include "gguf/ggml_type.h"
#include "quant/attend.h"

namespace tt {

// n: number of elements (a multiple of the type's block size).
using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n);
// *result = dot(x row of type T, y row of type vec_dot_type(T)), both of n elements.
using VecDotFn = void (*)(int64_t n, float* result, const void* x, const void* y);
// A tile of a matrix product, bit-identical to calling one VecDotFn per (row, token):
// out[t * ldo + r] = dot(row r of x, row t of y) for r < nr, t < nt; rows x_row / y_row bytes apart.
using TileFn = void (*)(int64_t n, int64_t nr, int64_t nt, const void* x, uint64_t x_row, const void* y, uint64_t y_row,
                        float* out, int64_t ldo);

struct QuantKernels {
  GgmlType type;
  GgmlType vec_dot_type;           // what activations are converted to before the dot product
  DequantizeRowFn dequantize_row;  // scalar reference
  QuantizeRowFn quantize_row;      // scalar reference; null for types we only read
  VecDotFn vec_dot_ref;            // scalar reference
  VecDotFn vec_dot;                // fastest path for this CPU (== vec_dot_ref when there is none)
};

// Kernels of a type the engine computes with, or nullptr when it is not implemented (callers refuse such
// tensors at load, naming the tensor and type).
const QuantKernels* find_kernels(GgmlType type);

// Which instruction-set path vec_dot uses on this CPU: "avx512-vnni", "avx512", "avx2" or "scalar".
const char* kernel_isa();

// Caps the kernels' instruction set for this process ("auto": the CPU's best; "avx2"; "scalar": the references),
// for comparing paths (`run`/`bench --kernel-isa`); never raises it above what the CPU has. Only before the first
// kernel lookup (the table is built once); later, an Error unless it changes nothing. Unknown names: an Error.
void limit_kernel_isa(std::string_view name);

}  // namespace tt

// ---- Helpers on top of the table (src/quant/quant.cpp).

namespace tt {

// Converts one activation row to `type` (a vec_dot_type: Q8_0, Q8_1, Q8_K, F16, BF16 or F32) the way llama.cpp's
// x86 CPU backend does (its SIMD Q8_0/Q8_1 quantizers scale by 127/amax and round half to even, unlike the
// *_ref ones that QuantKernels::quantize_row holds), on the fastest path for this CPU. n: a multiple of the block.
void quantize_activations(GgmlType type, const float* src, void* dst, int64_t n);

// results[r] = dot(weight row r, y) for r in [0, nrows): weight rows of `k.type` start x_row_bytes apart, y is
// one row of k.vec_dot_type; n elements each. Same values as calling k.vec_dot per row.
// The dot product each token of a matrix product uses. llama.cpp on x86 (AVX2 / AVX-512, the reference machine)
// does not multiply every weight type with its vec_dot: it stores Q4_0, IQ4_NL and Q4_K weights with 8 rows
// interleaved ("repack") and multiplies them with kernels of their own for every batch size, and it sends batches
// of BF16 through tinyBLAS. Their float summation orders differ from vec_dot, so reproducing its logits means
// choosing per token the kernel llama.cpp would have run:
//   - kGroupsOf4 (repack): of M tokens, the first M - M % 4 go through `batch` when M > 3, the rest through `single`;
//   - kWholeBatch (tinyBLAS): every token through `batch` when M > 1, a lone token through `single`.
// `applies` says whether llama.cpp takes the path for a weight of K columns and N rows.
struct BatchedKernels {
  enum class Grouping { kGroupsOf4, kWholeBatch };
  Grouping grouping;
  VecDotFn single;
  VecDotFn batch;
  bool (*applies)(int64_t K, int64_t N);

  VecDotFn for_token(int64_t t, int64_t M) const {
    if (M == 1) return single;
    if (grouping == Grouping::kWholeBatch) return batch;
    return M > 3 && t < M - M % 4 ? batch : single;
  }
};
// Null when llama.cpp multiplies this weight with the type's vec_dot for every token.
const BatchedKernels* find_batched(GgmlType type, int64_t K, int64_t N);

// The tile kernel that computes what `dot` computes for many rows at once on this CPU, or null when there is none.
TileFn find_tile(VecDotFn dot);
// out[t * ldo + r] = dot(row r of x, row t of y): through find_tile(dot) when it exists, else one call per output.
void dot_tile(VecDotFn dot, int64_t n, int64_t nr, int64_t nt, const void* x, uint64_t x_row, const void* y,
              uint64_t y_row, float* out, int64_t ldo);

// Up to kAttendMaxQueries (token, head) queries of flash attention over an F16 cache that share a KV head (see
// attend.h), fastest path for this CPU.
TT_ATTEND_F16_DECL(attend_f16);

// ggml_vec_swiglu_f32 as llama.cpp computes it on this machine: out = g / (1 + exp(-g)) * u, exp as ggml's
// AVX-512 ggml_v_expf on the first n - n % 16 elements and libm expf on the rest.
void swiglu_row(const float* g, const float* u, float* out, int64_t n);

// Rotary embedding of one head (see ref::rope_rotate in kernels.h), fastest path for this CPU.
void rope_rotate(const float* in, float* out, const float* cos_sin, int n_dims, bool neox);

void vec_dot_rows(const QuantKernels& k, int64_t n, int64_t nrows, float* results, const void* x, uint64_t x_row_bytes,
                  const void* y);

}  // namespace tt
