// The kernel table and the run-time choice of instruction set.
#include "quant/quant.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <string_view>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/kernels.h"

namespace tt {
namespace {

// Instruction sets, each including the ones before it. kAvx512Bf16 is kAvx512Vnni on a CPU that also has
// VDPBF16PS, where llama.cpp computes BF16 with that instruction. On CPUs with AMX-INT8 tiles (Sapphire Rapids and
// later), kAmxExact also runs the Q4_K, Q5_K and Q6_K prompt batches on tiles, in the AVX-512 kernels' order bit for
// bit (exact integer dots), so "auto" takes it; kAmx adds tiles for Q8_0 prompt batches in the float order of
// llama.cpp's AMX kernels. That order is not the one of the reference records (their llama.cpp did not take its AMX
// path: with it the logits of the Q8_0 models depart from the records by up to 0.17), so kAmx is only chosen by name
// (`--kernel-isa amx`), never by "auto".
enum class Isa { kScalar, kAvx2, kAvx512Vnni, kAvx512Bf16, kAmxExact, kAmx };
constexpr int kIsaCount = 6;

// One value per instruction set, indexed by Isa.
template <typename T>
using PerIsa = std::array<T, kIsaCount>;

bool cpu_has_f16c() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  return (ecx & bit_F16C) != 0;
}

Isa detect_isa() {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2") &&
                    cpu_has_f16c();
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vnni");
  if (avx512 && __builtin_cpu_supports("avx512bf16")) return amx_available() ? Isa::kAmx : Isa::kAvx512Bf16;
  if (avx512) return Isa::kAvx512Vnni;
  return avx2 ? Isa::kAvx2 : Isa::kScalar;
}

// The kernels are the process's: limit_kernel_isa() may lower their instruction set only before isa() first
// fixes it (the table is resolved from that one answer).
std::atomic<Isa> isa_cap{Isa::kAmxExact};
std::atomic<bool> isa_fixed{false};

Isa isa() {
  static const Isa chosen = [] {
    isa_fixed.store(true);
    return std::min(detect_isa(), isa_cap.load());
  }();
  return chosen;
}

// ---- The table.

// One type, every instruction set.
struct Entry {
  GgmlType type;
  GgmlType vec_dot_type;
  int64_t block_size;
  uint64_t block_bytes;
  DequantizeRowFn dequantize_row;
  QuantizeRowFn quantize_row = nullptr;
  VecDotFn vec_dot_ref = nullptr;
  PerIsa<QuantizeRowFn> quantize_activations = {};
  PerIsa<DotKernel> vec_dot = {};
  PerIsa<std::optional<BatchedKernels>> batched = {};
  PerIsa<std::optional<RowGroups>> row_groups = {};
};

// A kernel's functions in the scalar reference, AVX2 and AVX-512 namespaces (the same name in each), or in the
// two SIMD ones. AVX-512 + BF16 and AMX run the AVX-512 kernels (only the BF16, Q4_K, Q5_K, Q6_K and Q8_0 entries tell
// them apart).
#define TT_EACH_ISA(name) ref::name, avx2::name, avx512::name
#define TT_SIMD(name) avx2::name, avx512::name

PerIsa<QuantizeRowFn> each_isa(QuantizeRowFn scalar, QuantizeRowFn avx2, QuantizeRowFn avx512) {
  return {scalar, avx2, avx512, avx512, avx512, avx512};
}
// Dot products, with their tile kernels where the SIMD sets have them.
PerIsa<DotKernel> each_isa(VecDotFn scalar, VecDotFn avx2, VecDotFn avx512, TileFn avx2_tile = nullptr,
                           TileFn avx512_tile = nullptr) {
  const DotKernel fast512{avx512, avx512_tile};
  return {DotKernel{scalar}, DotKernel{avx2, avx2_tile}, fast512, fast512, fast512, fast512};
}

// Activations to halves with a SIMD row conversion.
template <void (*kRow)(const float*, uint16_t*, int64_t)>
void to_halves(const float* src, void* dst, int64_t n) {
  kRow(src, static_cast<uint16_t*>(dst), n);
}

// llama.cpp's repacked weights: whole groups of 8 rows, tokens in groups of 4 (see BatchedKernels).
BatchedKernels repacked(DotKernel gemv, DotKernel gemm) {
  return {BatchedKernels::Grouping::kGroupsOf4, [](int64_t, int64_t n) { return n % 8 == 0; }, gemv, gemm};
}
PerIsa<std::optional<BatchedKernels>> repacked(const PerIsa<DotKernel>& gemv, const PerIsa<DotKernel>& gemm) {
  PerIsa<std::optional<BatchedKernels>> out;
  for (int i = 0; i < kIsaCount; ++i) out[i] = repacked(gemv[i], gemm[i]);
  return out;
}

// `k` from instruction set `from` up, `below` under it.
template <typename T>
PerIsa<T> from_isa(Isa from, T below, T k) {
  PerIsa<T> out;
  for (int i = 0; i < kIsaCount; ++i) out[i] = i < static_cast<int>(from) ? below : k;
  return out;
}

// A tile kernel on AMX where the CPU has them (kAmxExact and up): the same outputs bit for bit.
PerIsa<DotKernel> amx_tile(PerIsa<DotKernel> kernels, TileFn tile) {
  for (Isa i : {Isa::kAmxExact, Isa::kAmx}) kernels[static_cast<int>(i)].tile = tile;
  return kernels;
}

// BF16 as llama.cpp computes it with VDPBF16PS (the records' builds had it): ggml_vec_dot_bf16 for one token,
// batches through tinyBLAS (K in whole 32-element steps, N in groups of 4). The instruction where the CPU has it,
// elsewhere FMAs where they give its sums exactly and its emulation otherwise (floats_avx2.cpp).
PerIsa<DotKernel> bf16_vec_dot() {
  auto out = from_isa(Isa::kAvx512Bf16, DotKernel{avx2::vec_dot_bf16_dp, avx2::tile_bf16_dp},
                      DotKernel{avx512bf16::vec_dot_bf16});
  out[static_cast<int>(Isa::kScalar)] = DotKernel{ref::vec_dot_bf16_avx512bf16};
  return out;
}
PerIsa<std::optional<BatchedKernels>> bf16_tinyblas() {
  const PerIsa<DotKernel> single = bf16_vec_dot();
  auto batch = from_isa(Isa::kAvx512Bf16, DotKernel{avx2::dot_bf16_tinyblas, avx2::tile_bf16_tinyblas},
                        DotKernel{avx512bf16::dot_bf16_tinyblas, avx512bf16::tile_bf16_tinyblas});
  batch[static_cast<int>(Isa::kScalar)] = DotKernel{ref::dot_bf16_tinyblas};
  PerIsa<std::optional<BatchedKernels>> out;
  for (int i = 0; i < kIsaCount; ++i)
    out[i] = BatchedKernels{BatchedKernels::Grouping::kWholeBatch,
                            [](int64_t k, int64_t n) { return k % 32 == 0 && n % 4 == 0; }, single[i], batch[i]};
  return out;
}

// Q8_0 batches (M > 1) through AMX tiles in llama.cpp's AMX order; single tokens keep vec_dot.
PerIsa<std::optional<BatchedKernels>> q8_0_amx(const PerIsa<DotKernel>& vec_dot) {
  PerIsa<std::optional<BatchedKernels>> out;
  out[static_cast<int>(Isa::kAmx)] =
      BatchedKernels{BatchedKernels::Grouping::kWholeBatch, [](int64_t, int64_t) { return true; },
                     vec_dot[static_cast<int>(Isa::kAmx)], DotKernel{ref::amx_dot_q8_0, amx::tile_q8_0}};
  return out;
}

// Q8_0 rows in groups of 16 on AVX-512 VNNI. Not on kAmx, whose prompt tiles read the file's rows.
PerIsa<std::optional<RowGroups>> q8_0_row_groups() {
  const DotKernel kernel{avx512::vec_dot_q8_0, avx512::tile_q8_0_rows16};
  auto out = from_isa<std::optional<RowGroups>>(Isa::kAvx512Vnni, std::nullopt,
                                                RowGroups{ref::group_rows_q8_0, kernel, kernel});
  out[static_cast<int>(Isa::kAmx)] = std::nullopt;
  return out;
}

// `groups` on the AVX-512 levels without AMX (the AMX levels' prompt tiles read the file's rows).
void set_avx512_without_amx(PerIsa<std::optional<RowGroups>>& out, const RowGroups& groups) {
  for (Isa i : {Isa::kAvx512Vnni, Isa::kAvx512Bf16}) out[static_cast<int>(i)] = groups;
}

// Q4_0 rows in groups of 16 on AVX2 and on AVX-512 without AMX (every token: llama.cpp's repacked order, where N is
// a multiple of 8): rows in lanes need no reduction of the 8 rows' sums (docs/performance.md).
PerIsa<std::optional<RowGroups>> q4_0_row_groups() {
  const DotKernel avx2_kernel{avx2::repack_dot_q4_0, avx2::tile_q4_0_rows16};
  const DotKernel avx512_kernel{avx512::repack_dot_q4_0, avx512::tile_q4_0_rows16};
  PerIsa<std::optional<RowGroups>> out;
  out[static_cast<int>(Isa::kAvx2)] = RowGroups{ref::group_rows_q4_0, avx2_kernel, avx2_kernel};
  set_avx512_without_amx(out, RowGroups{ref::group_rows_q4_0, avx512_kernel, avx512_kernel});
  return out;
}

// IQ4_NL rows in groups of 16 on AVX-512 without AMX, as Q4_0's (llama.cpp's repacked order for every token).
PerIsa<std::optional<RowGroups>> iq4_nl_row_groups() {
  const DotKernel kernel{avx512::repack_dot_iq4_nl, avx512::tile_iq4_nl_rows16};
  PerIsa<std::optional<RowGroups>> out;
  set_avx512_without_amx(out, RowGroups{ref::group_rows_iq4_nl, kernel, kernel});
  return out;
}

// Q4_1 rows in groups of 16 on AVX-512 VNNI (every token, as vec_dot).
PerIsa<std::optional<RowGroups>> q4_1_row_groups() {
  const DotKernel kernel{avx512::vec_dot_q4_1, avx512::tile_q4_1_rows16};
  return from_isa<std::optional<RowGroups>>(Isa::kAvx512Vnni, std::nullopt,
                                            RowGroups{ref::group_rows_q4_1, kernel, kernel});
}

// Q4_K rows in groups of 16 on every SIMD level (the groups' gemv computes and streams about 1.5x the file order's,
// their gemm needs no reduction: docs/performance.md); where the repacked gemm runs on AMX tiles (kAmxExact and up),
// the gemm on tiles that load the groups' parts as B tiles.
PerIsa<std::optional<RowGroups>> q4_k_row_groups() {
  PerIsa<std::optional<RowGroups>> out;
  out[static_cast<int>(Isa::kAvx2)] =
      RowGroups{ref::group_rows_q4_k, DotKernel{avx2::repack_gemv_q4_k, avx2::tile_q4_k_rows16_gemv},
                DotKernel{avx2::repack_gemm_q4_k, avx2::tile_q4_k_rows16_gemm}};
  for (Isa i : {Isa::kAvx512Vnni, Isa::kAvx512Bf16, Isa::kAmxExact, Isa::kAmx}) {
    const bool amx = i == Isa::kAmxExact || i == Isa::kAmx;
    out[static_cast<int>(i)] = RowGroups{
        ref::group_rows_q4_k, DotKernel{avx512::repack_gemv_q4_k, avx512::tile_q4_k_rows16_gemv},
        DotKernel{avx512::repack_gemm_q4_k, amx ? amx::tile_q4_k_rows16_gemm : avx512::tile_q4_k_rows16_gemm}};
  }
  return out;
}

// Q3_K rows in groups of 16 on AVX-512 without AMX (vec_dot's order for every token; ggml's 8 lanes a row are 8
// accumulators of the rows' lanes).
PerIsa<std::optional<RowGroups>> q3_k_row_groups() {
  PerIsa<std::optional<RowGroups>> out;
  const DotKernel kernel{avx512::vec_dot_q3_k, avx512::tile_q3_k_rows16};
  set_avx512_without_amx(out, RowGroups{ref::group_rows_q3_k, kernel, kernel});
  return out;
}

// Q2_K rows in groups of 16 on AVX-512 without AMX (llama.cpp's repacked orders: the gemv for single tokens, the gemm
// for batches; rows in lanes need no reduction).
PerIsa<std::optional<RowGroups>> q2_k_row_groups() {
  PerIsa<std::optional<RowGroups>> out;
  set_avx512_without_amx(
      out, RowGroups{ref::group_rows_q2_k, DotKernel{avx512::repack_gemv_q2_k, avx512::tile_q2_k_rows16_gemv},
                     DotKernel{avx512::repack_gemm_q2_k, avx512::tile_q2_k_rows16_gemm}});
  return out;
}

// Q2_K repacked as llama.cpp's AVX-512 builds (the records') repack it, on every CPU; its gemm on AMX tiles where
// the CPU has them.
PerIsa<std::optional<BatchedKernels>> q2_k_repacked() {
  auto out = repacked(each_isa(TT_EACH_ISA(repack_gemv_q2_k)), each_isa(TT_EACH_ISA(repack_gemm_q2_k)));
  for (Isa i : {Isa::kAmxExact, Isa::kAmx}) out[static_cast<int>(i)]->batch.tile = amx::tile_repack_gemm_q2_k;
  return out;
}

constexpr size_t kTypes = 17;

const std::array<Entry, kTypes>& entries() {
  using G = GgmlType;
  static const std::array<Entry, kTypes> table = {{
      {.type = G::F32,
       .vec_dot_type = G::F32,
       .block_size = 1,
       .block_bytes = sizeof(float),
       .dequantize_row = ref::dequantize_f32,
       .quantize_row = ref::quantize_f32,
       .vec_dot_ref = ref::vec_dot_f32,
       .quantize_activations = each_isa(ref::quantize_f32, ref::quantize_f32, ref::quantize_f32),
       .vec_dot = each_isa(TT_EACH_ISA(vec_dot_f32), avx2::tile_f32)},
      {.type = G::F16,
       .vec_dot_type = G::F16,
       .block_size = 1,
       .block_bytes = sizeof(uint16_t),
       .dequantize_row = ref::dequantize_f16,
       .quantize_row = ref::quantize_f16,
       .vec_dot_ref = ref::vec_dot_f16,
       .quantize_activations =
           each_isa(ref::quantize_f16, to_halves<avx2::fp32_to_fp16_row>, to_halves<avx512::fp32_to_fp16_row>),
       .vec_dot = each_isa(TT_EACH_ISA(vec_dot_f16), TT_SIMD(tile_f16))},
      // BF16 in llama.cpp's VDPBF16PS orders on every CPU (bf16_tinyblas).
      {.type = G::BF16,
       .vec_dot_type = G::BF16,
       .block_size = 1,
       .block_bytes = sizeof(uint16_t),
       .dequantize_row = ref::dequantize_bf16,
       .quantize_row = ref::quantize_bf16,
       .vec_dot_ref = ref::vec_dot_bf16,
       .quantize_activations = each_isa(ref::quantize_bf16, ref::quantize_bf16, ref::quantize_bf16),
       .vec_dot = bf16_vec_dot(),
       .batched = bf16_tinyblas()},
      {.type = G::Q4_0,
       .vec_dot_type = G::Q8_0,
       .block_size = kQK4_0,
       .block_bytes = sizeof(BlockQ4_0),
       .dequantize_row = ref::dequantize_q4_0,
       .quantize_row = ref::quantize_q4_0,
       .vec_dot_ref = ref::vec_dot_q4_0,
       .vec_dot = each_isa(TT_EACH_ISA(vec_dot_q4_0)),
       .batched =
           repacked(each_isa(TT_EACH_ISA(repack_dot_q4_0), TT_SIMD(tile_repack_q4_0)),
                    amx_tile(each_isa(TT_EACH_ISA(repack_dot_q4_0), TT_SIMD(tile_repack_q4_0)), amx::tile_repack_q4_0)),
       .row_groups = q4_0_row_groups()},
      {.type = G::Q4_1,
       .vec_dot_type = G::Q8_1,
       .block_size = kQK4_1,
       .block_bytes = sizeof(BlockQ4_1),
       .dequantize_row = ref::dequantize_q4_1,
       .quantize_row = ref::quantize_q4_1,
       .vec_dot_ref = ref::vec_dot_q4_1,
       .vec_dot = each_isa(TT_EACH_ISA(vec_dot_q4_1), TT_SIMD(tile_q4_1)),
       .row_groups = q4_1_row_groups()},
      {.type = G::Q5_0,
       .vec_dot_type = G::Q8_0,
       .block_size = kQK5_0,
       .block_bytes = sizeof(BlockQ5_0),
       .dequantize_row = ref::dequantize_q5_0,
       .quantize_row = ref::quantize_q5_0,
       .vec_dot_ref = ref::vec_dot_q5_0,
       .vec_dot = each_isa(TT_EACH_ISA(vec_dot_q5_0), TT_SIMD(tile_q5_0))},
      {.type = G::Q5_1,
       .vec_dot_type = G::Q8_1,
       .block_size = kQK5_1,
       .block_bytes = sizeof(BlockQ5_1),
       .dequantize_row = ref::dequantize_q5_1,
       .quantize_row = ref::quantize_q5_1,
       .vec_dot_ref = ref::vec_dot_q5_1,
       .vec_dot = each_isa(TT_EACH_ISA(vec_dot_q5_1), TT_SIMD(tile_q5_1))},
      {.type = G::Q8_0,
       .vec_dot_type = G::Q8_0,
       .block_size = kQK8_0,
       .block_bytes = sizeof(BlockQ8_0),
       .dequantize_row = ref::dequantize_q8_0,
       .quantize_row = ref::quantize_q8_0,
       .vec_dot_ref = ref::vec_dot_q8_0,
       .quantize_activations = each_isa(TT_EACH_ISA(quantize_q8_0_x86)),
       .vec_dot = each_isa(TT_EACH_ISA(vec_dot_q8_0), TT_SIMD(tile_q8_0)),
       .batched = q8_0_amx(each_isa(TT_EACH_ISA(vec_dot_q8_0), TT_SIMD(tile_q8_0))),
       .row_groups = q8_0_row_groups()},
      {.type = G::Q8_1,
       .vec_dot_type = G::Q8_1,
       .block_size = kQK8_1,
       .block_bytes = sizeof(BlockQ8_1),
       .dequantize_row = ref::dequantize_q8_1,
       .quantize_row = ref::quantize_q8_1,
       .quantize_activations = each_isa(TT_EACH_ISA(quantize_q8_1_x86))},
      {.type = G::Q2_K,
       .vec_dot_type = G::Q8_K,
       .block_size = kQK_K,
       .block_bytes = sizeof(BlockQ2_K),
       .dequantize_row = ref::dequantize_q2_k,
       .quantize_row = ref::quantize_q2_k,
       .vec_dot_ref = ref::vec_dot_q2_k,
       .vec_dot = each_isa(TT_EACH_ISA(vec_dot_q2_k)),
       .batched = q2_k_repacked(),
       .row_groups = q2_k_row_groups()},
      {.type = G::Q3_K,
       .vec_dot_type = G::Q8_K,
       .block_size = kQK_K,
       .block_bytes = sizeof(BlockQ3_K),
       .dequantize_row = ref::dequantize_q3_k,
       .quantize_row = ref::quantize_q3_k,
       .vec_dot_ref = ref::vec_dot_q3_k,
       .vec_dot = each_isa(TT_EACH_ISA(vec_dot_q3_k), TT_SIMD(tile_q3_k)),
       .row_groups = q3_k_row_groups()},
      {.type = G::Q4_K,
       .vec_dot_type = G::Q8_K,
       .block_size = kQK_K,
       .block_bytes = sizeof(BlockQ4_K),
       .dequantize_row = ref::dequantize_q4_k,
       .quantize_row = ref::quantize_q4_k,
       .vec_dot_ref = ref::vec_dot_q4_k,
       .vec_dot = each_isa(TT_EACH_ISA(vec_dot_q4_k)),
       .batched = repacked(each_isa(TT_EACH_ISA(repack_gemv_q4_k), TT_SIMD(tile_repack_gemv_q4_k)),
                           amx_tile(each_isa(TT_EACH_ISA(repack_gemm_q4_k), TT_SIMD(tile_repack_gemm_q4_k)),
                                    amx::tile_repack_gemm_q4_k)),
       .row_groups = q4_k_row_groups()},
      {.type = G::Q5_K,
       .vec_dot_type = G::Q8_K,
       .block_size = kQK_K,
       .block_bytes = sizeof(BlockQ5_K),
       .dequantize_row = ref::dequantize_q5_k,
       .quantize_row = ref::quantize_q5_k,
       .vec_dot_ref = ref::vec_dot_q5_k,
       .vec_dot = amx_tile(each_isa(TT_EACH_ISA(vec_dot_q5_k), TT_SIMD(tile_q5_k)), amx::tile_q5_k)},
      {.type = G::Q6_K,
       .vec_dot_type = G::Q8_K,
       .block_size = kQK_K,
       .block_bytes = sizeof(BlockQ6_K),
       .dequantize_row = ref::dequantize_q6_k,
       .quantize_row = ref::quantize_q6_k,
       .vec_dot_ref = ref::vec_dot_q6_k,
       .vec_dot = amx_tile(each_isa(TT_EACH_ISA(vec_dot_q6_k), TT_SIMD(tile_q6_k)), amx::tile_q6_k)},
      // The bytes of the reference, which ggml's x86 backend uses.
      {.type = G::Q8_K,
       .vec_dot_type = G::Q8_K,
       .block_size = kQK_K,
       .block_bytes = sizeof(BlockQ8_K),
       .dequantize_row = ref::dequantize_q8_k,
       .quantize_row = ref::quantize_q8_k,
       .quantize_activations = each_isa(TT_EACH_ISA(quantize_q8_k))},
      {.type = G::IQ4_NL,
       .vec_dot_type = G::Q8_0,
       .block_size = kQK4_NL,
       .block_bytes = sizeof(BlockIQ4_NL),
       .dequantize_row = ref::dequantize_iq4_nl,
       .quantize_row = ref::quantize_iq4_nl,
       .vec_dot_ref = ref::vec_dot_iq4_nl,
       .vec_dot = each_isa(TT_EACH_ISA(vec_dot_iq4_nl)),
       .batched = repacked(
           each_isa(TT_EACH_ISA(repack_dot_iq4_nl), TT_SIMD(tile_repack_iq4_nl)),
           amx_tile(each_isa(TT_EACH_ISA(repack_dot_iq4_nl), TT_SIMD(tile_repack_iq4_nl)), amx::tile_repack_iq4_nl)),
       .row_groups = iq4_nl_row_groups()},
      {.type = G::IQ4_XS,
       .vec_dot_type = G::Q8_K,
       .block_size = kQK_K,
       .block_bytes = sizeof(BlockIQ4_XS),
       .dequantize_row = ref::dequantize_iq4_xs,
       .quantize_row = ref::quantize_iq4_xs,
       .vec_dot_ref = ref::vec_dot_iq4_xs,
       .vec_dot = amx_tile(each_isa(TT_EACH_ISA(vec_dot_iq4_xs), TT_SIMD(tile_iq4_xs)), amx::tile_iq4_xs)},
  }};
  return table;
}

// Every type's entry with the kernels of the chosen instruction set.
const std::array<QuantKernels, kTypes>& resolved() {
  static const std::array<QuantKernels, kTypes> kernels = [] {
    const int i = static_cast<int>(isa());
    std::array<QuantKernels, kTypes> out;
    for (size_t t = 0; t < kTypes; ++t) {
      const Entry& e = entries()[t];
      out[t] = {.type = e.type,
                .vec_dot_type = e.vec_dot_type,
                .block_size = e.block_size,
                .block_bytes = e.block_bytes,
                .dequantize_row = e.dequantize_row,
                .quantize_row = e.quantize_row,
                .quantize_activations = e.quantize_activations[i],
                .vec_dot_ref = e.vec_dot_ref,
                .vec_dot = e.vec_dot[i],
                .batched = e.batched[i],
                .row_groups = e.row_groups[i]};
    }
    return out;
  }();
  return kernels;
}

// Kernels of other ops, per instruction set.
struct OpKernels {
  void (*fp16_to_fp32_row)(const uint16_t*, float*, int64_t);
  void (*fp32_to_fp16_row)(const float*, uint16_t*, int64_t);
  void (*swiglu_row)(const float*, const float*, float*, int64_t);
  void (*rope_rotate)(const float*, float*, const float*, int, bool);
  TT_ATTEND_F16_DECL((*attend_f16));
  TT_ATTEND_F16_DECL((*attend_f16_simd64));
  TT_ATTEND_TILED_DECL((*attend_tiled));
};
#define TT_OP_KERNELS(ns)                                                                                             \
  OpKernels {                                                                                                         \
    .fp16_to_fp32_row = ns::fp16_to_fp32_row, .fp32_to_fp16_row = ns::fp32_to_fp16_row, .swiglu_row = ns::swiglu_row, \
    .rope_rotate = ns::rope_rotate, .attend_f16 = ns::attend_f16, .attend_f16_simd64 = ns::attend_f16_simd64,         \
    .attend_tiled = ns::attend_tiled                                                                                  \
  }

const OpKernels& ops() {
  static const PerIsa<OpKernels> all = {TT_OP_KERNELS(ref),    TT_OP_KERNELS(avx2),   TT_OP_KERNELS(avx512),
                                        TT_OP_KERNELS(avx512), TT_OP_KERNELS(avx512), TT_OP_KERNELS(avx512)};
  return all[static_cast<int>(isa())];
}

}  // namespace

bool amx_available() {
  static const bool available = [] {
    unsigned eax, ebx, ecx, edx;  // CPUID leaf 7: EDX bit 24 AMX-TILE, bit 25 AMX-INT8
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || (edx & (3u << 24)) != (3u << 24)) return false;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;  // <asm/prctl.h>
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return available;
}

void DotKernel::run_tile(int64_t n, int64_t nr, int64_t nt, const void* x, uint64_t x_row, const void* y,
                         uint64_t y_row, float* out, int64_t ldo) const {
  if (tile) return tile(n, nr, nt, x, x_row, y, y_row, out, ldo);
  const uint8_t* xb = static_cast<const uint8_t*>(x);
  const uint8_t* yb = static_cast<const uint8_t*>(y);
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t r = 0; r < nr; ++r) dot(n, out + t * ldo + r, xb + r * x_row, yb + t * y_row);
}

const QuantKernels* find_kernels(GgmlType type) {
  for (const QuantKernels& k : resolved())
    if (k.type == type) return &k;
  return nullptr;
}

void limit_kernel_isa(std::string_view name) {
  Isa cap;
  if (name == "amx")
    cap = Isa::kAmx;
  else if (name == "auto")
    cap = Isa::kAmxExact;
  else if (name == "avx512")
    cap = Isa::kAvx512Bf16;
  else if (name == "avx2")
    cap = Isa::kAvx2;
  else if (name == "scalar")
    cap = Isa::kScalar;
  else
    fail("unknown kernel instruction set '{}' (expected auto, amx, avx512, avx2 or scalar)", name);
  if (name == "amx" && std::min(detect_isa(), cap) != Isa::kAmx)
    fail("--kernel-isa amx: this CPU has no AMX-INT8 tiles, or the kernel does not grant their state");
  if (isa_fixed.load()) {
    if (std::min(detect_isa(), cap) != isa())
      fail("the kernels are already chosen ({}): '{}' comes too late", kernel_isa(), name);
    return;
  }
  isa_cap.store(cap);
}

const char* kernel_isa() {
  switch (isa()) {
    case Isa::kAmx:
      return "amx";
    case Isa::kAvx512Vnni:
    case Isa::kAvx512Bf16:
    case Isa::kAmxExact:  // the AVX-512 kernels' results
      return "avx512-vnni";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kScalar:
      break;
  }
  return "scalar";
}

void quantize_activations(GgmlType type, const float* src, void* dst, int64_t n) {
  const QuantKernels* k = find_kernels(type);
  if (k == nullptr || k->quantize_activations == nullptr)
    fail("quantize_activations: {} is not an activation (vec_dot) type", type_name(type));
  k->quantize_activations(src, dst, n);
}

void vec_dot_rows(const QuantKernels& k, int64_t n, int64_t nrows, float* results, const void* x, uint64_t x_row_bytes,
                  const void* y) {
  const char* row = static_cast<const char*>(x);
  for (int64_t r = 0; r < nrows; ++r) k.vec_dot.dot(n, &results[r], row + r * x_row_bytes, y);
}

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) { ops().fp16_to_fp32_row(src, dst, n); }
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) { ops().fp32_to_fp16_row(src, dst, n); }
void swiglu_row(const float* g, const float* u, float* out, int64_t n) { ops().swiglu_row(g, u, out, n); }
void soft_max_row(const float* x, float* out, int64_t n) { ref::soft_max_row(x, out, n); }
void rope_rotate(const float* in, float* out, const float* cos_sin, int n_dims, bool neox) {
  ops().rope_rotate(in, out, cos_sin, n_dims, neox);
}
TT_ATTEND_F16_DECL(attend_f16) { ops().attend_f16(n_queries, q, n_pos, k, v, stride, d, scale, acc, out, partial); }
TT_ATTEND_TILED_DECL(attend_tiled) { ops().attend_tiled(a); }
TT_ATTEND_F16_DECL(attend_f16_simd64) {
  ops().attend_f16_simd64(n_queries, q, n_pos, k, v, stride, d, scale, acc, out, partial);
}

LlamaCppBuild default_llamacpp_build() {
  unsigned eax, ebx, ecx, edx;
  const bool avx512fp16 = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx & (1u << 23)) != 0;
  return avx512fp16 ? LlamaCppBuild::kIntelAvx512Fp16 : LlamaCppBuild::kAmdAvx512;
}

const char* llamacpp_build_name(LlamaCppBuild b) {
  return b == LlamaCppBuild::kIntelAvx512Fp16 ? "intel-avx512fp16" : "amd-avx512";
}

const BatchedKernels* batched_for(const QuantKernels& k, int64_t K, int64_t N, LlamaCppBuild build) {
  // The AMD build's F16 batches: the AVX-512 levels take the AVX2 tile too (the same order; output by output was
  // half its speed, docs/performance.md "AVX-512 without AMX").
  static const BatchedKernels f16_amd{BatchedKernels::Grouping::kWholeBatch,
                                      [](int64_t k_cols, int64_t) { return k_cols % 16 == 0; },
                                      each_isa(TT_EACH_ISA(vec_dot_f16_simd64))[static_cast<int>(isa())],
                                      each_isa(TT_EACH_ISA(dot_f16_tinyblas), avx2::tile_f16_tinyblas,
                                               avx2::tile_f16_tinyblas)[static_cast<int>(isa())]};
  if (k.type == GgmlType::F16 && build == LlamaCppBuild::kAmdAvx512) return f16_amd.applies(K, N) ? &f16_amd : nullptr;
  return k.batched_for(K, N);
}

}  // namespace tt
