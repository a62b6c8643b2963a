// The kernel table and the run-time choice of instruction set.
#include "quant/quant.h"

#include <cpuid.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <string_view>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/kernels.h"

namespace tt {
namespace {

enum class Isa { kScalar, kAvx2, kAvx512Vnni };

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
  return avx512 ? Isa::kAvx512Vnni : avx2 ? Isa::kAvx2 : Isa::kScalar;
}

// The kernel table is the process's: limit_kernel_isa() may lower its instruction set only before isa() first
// fixes it (every table below is built from that one answer).
std::atomic<Isa> isa_cap{Isa::kAvx512Vnni};
std::atomic<bool> isa_fixed{false};

Isa isa() {
  static const Isa chosen = [] {
    isa_fixed.store(true);
    return std::min(detect_isa(), isa_cap.load());
  }();
  return chosen;
}

bool has_avx512_bf16() {
  static const bool has = isa() == Isa::kAvx512Vnni && __builtin_cpu_supports("avx512bf16");
  return has;
}

// Fast function of one ISA namespace for the given reference, by name.
#define TT_FAST_TABLE(ns)                                                                                              \
  FastSet {                                                                                                            \
    ns::vec_dot_f32, ns::vec_dot_f16, ns::vec_dot_q4_0, ns::vec_dot_q4_1, ns::vec_dot_q5_0, ns::vec_dot_q5_1,          \
        ns::vec_dot_q8_0, ns::vec_dot_iq4_nl, ns::vec_dot_q2_k, ns::vec_dot_q3_k, ns::vec_dot_q4_k, ns::vec_dot_q5_k,  \
        ns::vec_dot_q6_k, ns::vec_dot_iq4_xs, ns::quantize_q8_0_x86, ns::quantize_q8_1_x86, ns::fp16_to_fp32_row,      \
        ns::fp32_to_fp16_row, ns::repack_dot_q4_0, ns::repack_dot_iq4_nl, ns::repack_gemv_q4_k, ns::repack_gemm_q4_k,  \
        ns::tile_repack_gemv_q4_k, ns::tile_repack_gemm_q4_k, ns::swiglu_row, ns::quantize_q8_k, ns::tile_repack_q4_0, \
        ns::tile_repack_iq4_nl, ns::attend_f16, ns::tile_q8_0, ns::tile_q6_k, ns::rope_rotate                          \
  }

struct FastSet {
  VecDotFn f32, f16, q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_xs;
  QuantizeRowFn q8_0_act, q8_1_act;
  void (*h2f_row)(const uint16_t*, float*, int64_t);
  void (*f2h_row)(const float*, uint16_t*, int64_t);
  VecDotFn repack_q4_0, repack_iq4_nl, repack_gemv_q4_k, repack_gemm_q4_k;
  TileFn tile_gemv_q4_k, tile_gemm_q4_k;  // null: no tile kernel (the per-row loop is used)
  void (*swiglu_row)(const float*, const float*, float*, int64_t);
  QuantizeRowFn q8_k_act;
  TileFn tile_q4_0, tile_iq4_nl;
  TT_ATTEND_F16_DECL((*attend_f16));
  TileFn tile_q8_0, tile_q6_k;
  void (*rope_rotate)(const float*, float*, const float*, int, bool);
};

void scalar_h2f_row(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}
void scalar_f2h_row(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

const FastSet& fast() {
  static const FastSet set = [] {
    switch (isa()) {
      case Isa::kAvx512Vnni:
        return TT_FAST_TABLE(avx512);
      case Isa::kAvx2:
        return TT_FAST_TABLE(avx2);
      case Isa::kScalar:
        break;
    }
    return FastSet{ref::vec_dot_f32,
                   ref::vec_dot_f16,
                   ref::vec_dot_q4_0,
                   ref::vec_dot_q4_1,
                   ref::vec_dot_q5_0,
                   ref::vec_dot_q5_1,
                   ref::vec_dot_q8_0,
                   ref::vec_dot_iq4_nl,
                   ref::vec_dot_q2_k,
                   ref::vec_dot_q3_k,
                   ref::vec_dot_q4_k,
                   ref::vec_dot_q5_k,
                   ref::vec_dot_q6_k,
                   ref::vec_dot_iq4_xs,
                   ref::quantize_q8_0_x86,
                   ref::quantize_q8_1_x86,
                   scalar_h2f_row,
                   scalar_f2h_row,
                   ref::repack_dot_q4_0,
                   ref::repack_dot_iq4_nl,
                   ref::repack_gemv_q4_k,
                   ref::repack_gemm_q4_k,
                   nullptr,
                   nullptr,
                   ref::swiglu_row,
                   ref::quantize_q8_k,
                   nullptr,
                   nullptr,
                   ref::attend_f16,
                   nullptr,
                   nullptr,
                   ref::rope_rotate};
  }();
  return set;
}

struct Table {
  std::array<QuantKernels, 18> entries;
  int count = 0;
};

const Table& table() {
  static const Table t = [] {
    const FastSet& f = fast();
    using G = GgmlType;
    Table t;
    auto add = [&](QuantKernels k) { t.entries[t.count++] = k; };
    add({G::F32, G::F32, ref::dequantize_f32, ref::quantize_f32, ref::vec_dot_f32, f.f32});
    add({G::F16, G::F16, ref::dequantize_f16, ref::quantize_f16, ref::vec_dot_f16, f.f16});
    // BF16 follows llama.cpp's VDPBF16PS order where the CPU has that instruction (what the reference ran on).
    const auto bf16_dot = has_avx512_bf16() ? ref::vec_dot_bf16_avx512bf16 : ref::vec_dot_bf16;
    add({G::BF16, G::BF16, ref::dequantize_bf16, ref::quantize_bf16, ref::vec_dot_bf16, bf16_dot});
    add({G::Q4_0, G::Q8_0, ref::dequantize_q4_0, ref::quantize_q4_0, ref::vec_dot_q4_0, f.q4_0});
    add({G::Q4_1, G::Q8_1, ref::dequantize_q4_1, ref::quantize_q4_1, ref::vec_dot_q4_1, f.q4_1});
    add({G::Q5_0, G::Q8_0, ref::dequantize_q5_0, ref::quantize_q5_0, ref::vec_dot_q5_0, f.q5_0});
    add({G::Q5_1, G::Q8_1, ref::dequantize_q5_1, ref::quantize_q5_1, ref::vec_dot_q5_1, f.q5_1});
    add({G::Q8_0, G::Q8_0, ref::dequantize_q8_0, ref::quantize_q8_0, ref::vec_dot_q8_0, f.q8_0});
    add({G::Q8_1, G::Q8_1, ref::dequantize_q8_1, ref::quantize_q8_1, nullptr, nullptr});
    add({G::Q2_K, G::Q8_K, ref::dequantize_q2_k, nullptr, ref::vec_dot_q2_k, f.q2_k});
    add({G::Q3_K, G::Q8_K, ref::dequantize_q3_k, nullptr, ref::vec_dot_q3_k, f.q3_k});
    add({G::Q4_K, G::Q8_K, ref::dequantize_q4_k, nullptr, ref::vec_dot_q4_k, f.q4_k});
    add({G::Q5_K, G::Q8_K, ref::dequantize_q5_k, nullptr, ref::vec_dot_q5_k, f.q5_k});
    add({G::Q6_K, G::Q8_K, ref::dequantize_q6_k, nullptr, ref::vec_dot_q6_k, f.q6_k});
    add({G::Q8_K, G::Q8_K, ref::dequantize_q8_k, ref::quantize_q8_k, nullptr, nullptr});
    add({G::IQ4_NL, G::Q8_0, ref::dequantize_iq4_nl, ref::quantize_iq4_nl, ref::vec_dot_iq4_nl, f.iq4_nl});
    add({G::IQ4_XS, G::Q8_K, ref::dequantize_iq4_xs, nullptr, ref::vec_dot_iq4_xs, f.iq4_xs});
    return t;
  }();
  return t;
}

}  // namespace

const QuantKernels* find_kernels(GgmlType type) {
  const Table& t = table();
  for (int i = 0; i < t.count; ++i) {
    if (t.entries[i].type == type) return &t.entries[i];
  }
  return nullptr;
}

const BatchedKernels* find_batched(GgmlType type, int64_t K, int64_t N) {
  using Grouping = BatchedKernels::Grouping;
  // Repacking needs whole groups of 8 rows; tinyBLAS needs K in whole 32-element steps and N in groups of 4.
  auto rows_of_8 = [](int64_t, int64_t n) { return n % 8 == 0; };
  auto tinyblas_bf16 = [](int64_t k, int64_t n) { return k % 32 == 0 && n % 4 == 0; };
  const FastSet& f = fast();
  static const BatchedKernels q4_0{Grouping::kGroupsOf4, f.repack_q4_0, f.repack_q4_0, rows_of_8};
  static const BatchedKernels iq4_nl{Grouping::kGroupsOf4, f.repack_iq4_nl, f.repack_iq4_nl, rows_of_8};
  static const BatchedKernels q4_k{Grouping::kGroupsOf4, f.repack_gemv_q4_k, f.repack_gemm_q4_k, rows_of_8};
  static const BatchedKernels q2_k{Grouping::kGroupsOf4, ref::repack_gemv_q2_k, ref::repack_gemm_q2_k, rows_of_8};
  static const BatchedKernels bf16{Grouping::kWholeBatch, ref::vec_dot_bf16_avx512bf16, ref::dot_bf16_tinyblas,
                                   tinyblas_bf16};
  const BatchedKernels* k = nullptr;
  switch (type) {
    case GgmlType::Q4_0:
      k = &q4_0;
      break;
    case GgmlType::IQ4_NL:
      k = &iq4_nl;
      break;
    case GgmlType::Q4_K:
      k = &q4_k;
      break;
    case GgmlType::Q2_K:  // repacked only where llama.cpp has its AVX-512 kernels
      k = isa() == Isa::kAvx512Vnni ? &q2_k : nullptr;
      break;
    case GgmlType::BF16:
      k = has_avx512_bf16() ? &bf16 : nullptr;
      break;
    default:
      break;
  }
  return k != nullptr && k->applies(K, N) ? k : nullptr;
}

void limit_kernel_isa(std::string_view name) {
  Isa cap;
  if (name == "auto")
    cap = Isa::kAvx512Vnni;
  else if (name == "avx2")
    cap = Isa::kAvx2;
  else if (name == "scalar")
    cap = Isa::kScalar;
  else
    fail("unknown kernel instruction set '{}' (expected auto, avx2 or scalar)", name);
  if (isa_fixed.load()) {
    if (std::min(detect_isa(), cap) != isa())
      fail("the kernels are already chosen ({}): '{}' comes too late", kernel_isa(), name);
    return;
  }
  isa_cap.store(cap);
}

const char* kernel_isa() {
  switch (isa()) {
    case Isa::kAvx512Vnni:
      return "avx512-vnni";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kScalar:
      break;
  }
  return "scalar";
}

void quantize_activations(GgmlType type, const float* src, void* dst, int64_t n) {
  switch (type) {
    case GgmlType::Q8_0:
      return fast().q8_0_act(src, dst, n);
    case GgmlType::Q8_1:
      return fast().q8_1_act(src, dst, n);
    case GgmlType::Q8_K:
      return fast().q8_k_act(src, dst, n);  // the bytes of the reference, which ggml's x86 backend uses
    case GgmlType::F16:
      return fast().f2h_row(src, static_cast<uint16_t*>(dst), n);
    case GgmlType::BF16:
      return ref::quantize_bf16(src, dst, n);
    case GgmlType::F32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    default:
      fail("quantize_activations: {} is not an activation (vec_dot) type", type_name(type));
  }
}

void vec_dot_rows(const QuantKernels& k, int64_t n, int64_t nrows, float* results, const void* x, uint64_t x_row_bytes,
                  const void* y) {
  const char* row = static_cast<const char*>(x);
  for (int64_t r = 0; r < nrows; ++r) k.vec_dot(n, &results[r], row + r * x_row_bytes, y);
}

TileFn find_tile(VecDotFn dot) {
  const FastSet& f = fast();
  if (dot == f.repack_gemv_q4_k) return f.tile_gemv_q4_k;
  if (dot == f.repack_gemm_q4_k) return f.tile_gemm_q4_k;
  if (dot == f.repack_q4_0) return f.tile_q4_0;
  if (dot == f.q8_0) return f.tile_q8_0;
  if (dot == f.q6_k) return f.tile_q6_k;
  if (dot == f.repack_iq4_nl) return f.tile_iq4_nl;
  return nullptr;
}

void dot_tile(VecDotFn dot, int64_t n, int64_t nr, int64_t nt, const void* x, uint64_t x_row, const void* y,
              uint64_t y_row, float* out, int64_t ldo) {
  if (const TileFn tile = find_tile(dot)) return tile(n, nr, nt, x, x_row, y, y_row, out, ldo);
  const uint8_t* xb = static_cast<const uint8_t*>(x);
  const uint8_t* yb = static_cast<const uint8_t*>(y);
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t r = 0; r < nr; ++r) dot(n, out + t * ldo + r, xb + r * x_row, yb + t * y_row);
}

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) { fast().h2f_row(src, dst, n); }
void swiglu_row(const float* g, const float* u, float* out, int64_t n) { fast().swiglu_row(g, u, out, n); }
void rope_rotate(const float* in, float* out, const float* cos_sin, int n_dims, bool neox) {
  fast().rope_rotate(in, out, cos_sin, n_dims, neox);
}
TT_ATTEND_F16_DECL(attend_f16) { fast().attend_f16(n_queries, q, n_pos, k, v, stride, d, scale, acc, out); }
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) { fast().f2h_row(src, dst, n); }

}  // namespace tt
