// Kernels per element type: one table, like ggml's type traits. Each type has one entry (src/quant/quant.cpp)
// holding its block layout, scalar references (the oracle in tests) and, per instruction set (scalar, AVX2,
// AVX-512 VNNI, AVX-512 VNNI + BF16), its dot product, tile and batched kernels; the entry find_kernels returns
// holds those of the set chosen at run time for this CPU.
//
// Matrix products follow llama.cpp: activations are first converted to the weight type's `vec_dot_type`
// (Q8_0 / Q8_1 / Q8_K blocks for quantized weights, F16 for F16 weights, F32 for F32 ...), then each output is
// a dot product of one weight row with one converted activation row. Doing the same as llama.cpp is what makes
// logits agree within the reference tolerance.
#pragma once

#include <cstdint>
#include <optional>
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

// A dot product and the tile kernel that computes it for many rows and tokens at once, if there is one.
struct DotKernel {
  VecDotFn dot = nullptr;
  TileFn tile = nullptr;  // null: the tile is one call of `dot` per output

  // out[t * ldo + r] = dot(row r of x, row t of y) (see TileFn).
  void run_tile(int64_t n, int64_t nr, int64_t nt, const void* x, uint64_t x_row, const void* y, uint64_t y_row,
                float* out, int64_t ldo) const;
  bool operator==(const DotKernel&) const = default;
};

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
  bool (*applies)(int64_t K, int64_t N);
  DotKernel single;
  DotKernel batch;

  const DotKernel& for_token(int64_t t, int64_t M) const {
    if (M == 1) return single;
    if (grouping == Grouping::kWholeBatch) return batch;
    return M > 3 && t < M - M % 4 ? batch : single;
  }
};

// Weight rows stored 16 to a group the way a type's SIMD kernels read them: one row per 32-bit lane, so one
// instruction serves 16 rows and no sum crosses lanes (docs/engine.md "Row groups"; each type's layout beside its
// `group_rows_*` in reference.cpp). A group holds the same bytes as its 16 rows in another order, so a byte range of
// whole groups holds what the file's range holds. Mul_mat's 16-row tiles are the groups.
constexpr int64_t kRowGroup = 16;
struct RowGroups {
  void (*group)(const void* rows, void* grouped, int64_t n);  // 16 rows of n elements in file order -> one group
  // run_tile(n, nr, ...): rows [0, nr) are nr / 16 groups, then nr % 16 rows in file order (a tensor's last rows).
  // `single` gives the outputs of the kernel a token takes on the file's rows (vec_dot, or the batched kernels'
  // `single`), `batch` those of BatchedKernels::batch; the type's BatchedKernels choose per token as for file rows
  // (for_token).
  DotKernel single;
  DotKernel batch;
  // The kernel for token t of M on grouped rows of a weight whose file-order kernels are `batched` (or vec_dot).
  const DotKernel& for_token(const BatchedKernels* batched, int64_t t, int64_t M) const {
    return batched && &batched->for_token(t, M) == &batched->batch ? batch : single;
  }
};

// One type's entry, with the kernels of this CPU's instruction set.
struct QuantKernels {
  GgmlType type;
  GgmlType vec_dot_type;           // what activations are converted to before the dot product
  int64_t block_size;              // elements per block
  uint64_t block_bytes;            // bytes per block
  DequantizeRowFn dequantize_row;  // scalar reference
  QuantizeRowFn quantize_row;      // scalar reference; null for types we only read
  // For a vec_dot_type (Q8_0, Q8_1, Q8_K, F16, BF16, F32): converts an activation row the way llama.cpp's x86 CPU
  // backend does (its SIMD Q8_0/Q8_1 quantizers scale by 127/amax and round half to even, unlike the *_ref ones
  // that quantize_row holds), fastest path; null for other types.
  QuantizeRowFn quantize_activations;
  VecDotFn vec_dot_ref;                   // scalar reference; null for activation-only types
  DotKernel vec_dot;                      // fastest path (== vec_dot_ref when there is none)
  std::optional<BatchedKernels> batched;  // when llama.cpp multiplies this type with other kernels than vec_dot
  std::optional<RowGroups> row_groups;    // where this instruction set multiplies rows stored in groups faster

  // Whether a weight of K columns and N rows may be stored in row groups: the type has them here, N holds a group,
  // and where the type has batched kernels they apply to this shape (the groups reproduce those, not vec_dot).
  bool groups_rows(int64_t K, int64_t N) const {
    return row_groups && N >= kRowGroup && (!batched || batched_for(K, N));
  }

  // The batched kernels for a weight of K columns and N rows, or null when every token takes vec_dot.
  const BatchedKernels* batched_for(int64_t K, int64_t N) const {
    return batched && batched->applies(K, N) ? &*batched : nullptr;
  }
};

// Kernels of a type the engine computes with, or nullptr when it is not implemented (callers refuse such
// tensors at load, naming the tensor and type).
const QuantKernels* find_kernels(GgmlType type);

// The llama.cpp build whose float order the engine reproduces where two builds of the same llama.cpp, each made with
// -march=native, differ by CPU kind (measured against ../shared/reference, docs/engine.md "Agreement"):
//   kIntelAvx512Fp16: on an Intel AVX-512 CPU with AVX512-FP16 and AMX (the dense models' records): flash
//     attention's K.Q products summed in double; F16 weights through vec_dot.
//   kAmdAvx512: on an AMD AVX-512 CPU without them (the MoE and qwen3 records): K.Q as ggml_vec_dot_f16's 64-element
//     SIMD steps; F16 weights through tinyBLAS in batches and ggml_vec_dot_f16's SIMD steps for one token.
// Both builds are reproduced on any CPU: by SIMD kernels in their orders where the CPU has AVX2, else by the scalar
// references.
enum class LlamaCppBuild : uint8_t { kIntelAvx512Fp16, kAmdAvx512 };
// This CPU's kind: kIntelAvx512Fp16 where it has AVX512-FP16, else kAmdAvx512.
LlamaCppBuild default_llamacpp_build();
const char* llamacpp_build_name(LlamaCppBuild b);  // "intel-avx512fp16" or "amd-avx512"

// Whether `--kernel-isa amx` can run here: the CPU has AMX-TILE and AMX-INT8 and Linux grants the tile data state
// (asked once per process).
bool amx_available();

// Which instruction-set path the kernels use on this CPU: "amx" (AVX-512 VNNI, and AMX-INT8 tiles for Q4_K,
// Q5_K, Q6_K and Q8_0 prompt batches), "avx512-vnni" (the AVX-512 kernels' results, with or without the K-quant
// tiles that give them bit for bit), "avx2" or "scalar".
const char* kernel_isa();

// Caps the kernels' instruction set for this process ("auto": the CPU's best up to AVX-512 VNNI (+BF16), the
// reference records' float order, with AMX-INT8 tiles for Q4_K, Q5_K and Q6_K prompt batches where the CPU has them
// (same bits); "avx512": the same without AMX; "amx": also AMX-INT8 tiles for Q8_0 prompt batches in llama.cpp's AMX
// order, an Error where the CPU or OS has none; "avx2"; "scalar": the references), for comparing paths (`run`/`bench
// --kernel-isa`); never raises it above what the CPU has. Only before the first kernel lookup (the table is resolved
// once); later, an Error unless it changes nothing. Unknown names: an Error.
void limit_kernel_isa(std::string_view name);

// The batched kernels of k for a weight of K columns and N rows in `build`'s order, or null when every token takes
// k.vec_dot.
const BatchedKernels* batched_for(const QuantKernels& k, int64_t K, int64_t N, LlamaCppBuild build);

// find_kernels(type)->quantize_activations; an Error for a type that is not a vec_dot type.
void quantize_activations(GgmlType type, const float* src, void* dst, int64_t n);

// results[r] = k.vec_dot(weight row r, y) for r in [0, nrows): weight rows start x_row_bytes apart.
void vec_dot_rows(const QuantKernels& k, int64_t n, int64_t nrows, float* results, const void* x, uint64_t x_row_bytes,
                  const void* y);

// ---- Kernels of other ops, fastest path for this CPU (fp16_to_fp32_row / fp32_to_fp16_row: core/fp16.h).

// Up to kAttendMaxQueries (token, head) queries of flash attention over an F16 cache that share a KV head (see
// attend.h).
TT_ATTEND_F16_DECL(attend_f16);
// The same in the order of kAmdAvx512 (reference: ref::attend_f16_simd64).
TT_ATTEND_F16_DECL(attend_f16_simd64);
// llama.cpp's tiled flash attention, which it runs for batches of kTileRows tokens or more (attend.h).
TT_ATTEND_TILED_DECL(attend_tiled);

// ggml_vec_swiglu_f32 as llama.cpp computes it on this machine: out = g / (1 + exp(-g)) * u, exp as ggml's
// AVX-512 ggml_v_expf on the first n - n % 16 elements and libm expf on the rest.
void swiglu_row(const float* g, const float* u, float* out, int64_t n);

// A softmax row as llama.cpp's AVX-512 build computes it (see ref::soft_max_row in kernels.h; a scalar emulation:
// it runs on router logits, a few dozen per token).
void soft_max_row(const float* x, float* out, int64_t n);

// Rotary embedding of one head (see ref::rope_rotate in kernels.h).
void rope_rotate(const float* in, float* out, const float* cos_sin, int n_dims, bool neox);

}  // namespace tt
