// Quantization kernels: dequantization against gguf-py's output, fast paths against the scalar references,
// references against dot products of dequantized rows, quantizer round trips, fp16/bf16 conversions.
#include "quant/quant.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/error.h"
#include "core/fp16.h"
#include "gguf/ggml_type.h"
#include "quant/blocks.h"
#include "quant/kernels.h"

namespace tt {
namespace {

using G = GgmlType;

// Index of the first element where the two arrays differ by more than tol (NaNs equal if both NaN), or -1.
int64_t first_difference(const float* a, const float* b, int64_t n, float tol) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (!(std::fabs(a[i] - b[i]) <= tol)) return i;
  }
  return -1;
}

std::string describe_difference(const float* got, const float* want, int64_t n, float tol) {
  const int64_t i = first_difference(got, want, n, tol);
  if (i < 0) return "";
  char buf[200];
  std::snprintf(buf, sizeof(buf), "first difference at index %lld: got %.9g (0x%08x), want %.9g (0x%08x)",
                static_cast<long long>(i), got[i], std::bit_cast<uint32_t>(got[i]), want[i],
                std::bit_cast<uint32_t>(want[i]));
  return buf;
}

const std::vector<G> kWeightTypes = {G::F32,  G::F16,  G::BF16, G::Q4_0, G::Q4_1, G::Q5_0,   G::Q5_1,  G::Q8_0,
                                     G::Q2_K, G::Q3_K, G::Q4_K, G::Q5_K, G::Q6_K, G::IQ4_NL, G::IQ4_XS};

// Which fast kernel sets this CPU can run, by the features their files are compiled for (as quant.cpp decides).
struct CpuSets {
  bool avx2, avx512;
};
CpuSets cpu_sets() {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") &&
                    __builtin_cpu_supports("bmi2");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vnni");
  return {avx2, avx512};
}

// The vec_dot implementations to check against the reference: the table's choice and every ISA this CPU runs.
std::vector<std::pair<std::string, VecDotFn>> fast_impls(G type) {
  std::vector<std::pair<std::string, VecDotFn>> out;
  out.emplace_back(std::string("table/") + kernel_isa(), find_kernels(type)->vec_dot.dot);
  const auto [avx2, avx512] = cpu_sets();
#define TT_IMPL_CASE(T, fn)                             \
  case G::T:                                            \
    if (avx2) out.emplace_back("avx2", avx2::fn);       \
    if (avx512) out.emplace_back("avx512", avx512::fn); \
    break;
  switch (type) {
    TT_IMPL_CASE(F32, vec_dot_f32)
    TT_IMPL_CASE(F16, vec_dot_f16)
    TT_IMPL_CASE(Q4_0, vec_dot_q4_0)
    TT_IMPL_CASE(Q4_1, vec_dot_q4_1)
    TT_IMPL_CASE(Q5_0, vec_dot_q5_0)
    TT_IMPL_CASE(Q5_1, vec_dot_q5_1)
    TT_IMPL_CASE(Q8_0, vec_dot_q8_0)
    TT_IMPL_CASE(IQ4_NL, vec_dot_iq4_nl)
    TT_IMPL_CASE(Q2_K, vec_dot_q2_k)
    TT_IMPL_CASE(Q3_K, vec_dot_q3_k)
    TT_IMPL_CASE(Q4_K, vec_dot_q4_k)
    TT_IMPL_CASE(Q5_K, vec_dot_q5_k)
    TT_IMPL_CASE(Q6_K, vec_dot_q6_k)
    TT_IMPL_CASE(IQ4_XS, vec_dot_iq4_xs)
    default:
      break;
  }
#undef TT_IMPL_CASE
  return out;
}

// Byte offsets of the fp16 scale fields of a block (d, dmin / m), found from the layouts.
std::vector<size_t> half_fields(G type) {
  switch (type) {
    case G::Q4_0:
    case G::Q5_0:
    case G::Q8_0:
    case G::IQ4_NL:
    case G::IQ4_XS:
      return {0};
    case G::Q4_1:
    case G::Q5_1:
    case G::Q4_K:
    case G::Q5_K:
      return {0, 2};
    case G::Q2_K:
      return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case G::Q3_K:
      return {offsetof(BlockQ3_K, d)};
    case G::Q6_K:
      return {offsetof(BlockQ6_K, d)};
    default:
      return {};
  }
}

struct Rng {
  std::mt19937 gen{12345};
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen); }
  float normal() { return std::normal_distribution<float>(0.0f, 1.0f)(gen); }
  int integer(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); }
  uint8_t byte() { return static_cast<uint8_t>(gen()); }
};

// A weight row of n elements: random quant bits; fp16 scales random (or exactly 1.0 when `unit`).
std::vector<uint8_t> random_weights(G type, int64_t n, Rng& rng, bool unit) {
  const GgmlTypeTraits& tr = type_traits(type);
  std::vector<uint8_t> row(row_bytes(type, n));
  if (type == G::F32 || type == G::F16 || type == G::BF16) {
    std::vector<float> f(n);
    for (float& v : f) v = rng.normal();
    find_kernels(type)->quantize_row(f.data(), row.data(), n);
    return row;
  }
  for (uint8_t& b : row) b = rng.byte();
  for (size_t blk = 0; blk < row.size() / tr.bytes_per_block; ++blk) {
    for (size_t off : half_fields(type)) {
      const uint16_t h = unit ? uint16_t{0x3C00} : fp32_to_fp16(rng.uniform(-0.05f, 0.05f));
      std::memcpy(row.data() + blk * tr.bytes_per_block + off, &h, 2);
    }
  }
  return row;
}

// An activation row of type `act` (Q8_0 / Q8_1 / Q8_K, F16, BF16, F32): realistic (quantized from normal floats)
// or, when `unit`, quants in [-2, 2] with scale 1 so every float operation of a dot product is exact.
std::vector<uint8_t> random_activations(G act, int64_t n, Rng& rng, bool unit) {
  std::vector<uint8_t> row(row_bytes(act, n));
  if (!unit) {
    std::vector<float> f(n);
    for (float& v : f) v = rng.normal();
    find_kernels(act)->quantize_row(f.data(), row.data(), n);
    return row;
  }
  if (act == G::Q8_K) {
    auto* b = reinterpret_cast<BlockQ8_K*>(row.data());
    for (int64_t i = 0; i < n / kQK_K; ++i) {
      b[i].d = 1.0f;
      for (int j = 0; j < kQK_K; ++j) b[i].qs[j] = static_cast<int8_t>(rng.integer(-2, 2));
      for (int j = 0; j < 16; ++j) {
        int s = 0;
        for (int l = 0; l < 16; ++l) s += b[i].qs[16 * j + l];
        b[i].bsums[j] = static_cast<int16_t>(s);
      }
    }
  } else if (act == G::Q8_0) {
    auto* b = reinterpret_cast<BlockQ8_0*>(row.data());
    for (int64_t i = 0; i < n / 32; ++i) {
      b[i].d = 0x3C00;
      for (int8_t& q : b[i].qs) q = static_cast<int8_t>(rng.integer(-2, 2));
    }
  } else {
    auto* b = reinterpret_cast<BlockQ8_1*>(row.data());
    for (int64_t i = 0; i < n / 32; ++i) {
      b[i].d = 0x3C00;
      int s = 0;
      for (int8_t& q : b[i].qs) s += (q = static_cast<int8_t>(rng.integer(-2, 2)));
      b[i].s = fp32_to_fp16(static_cast<float>(s));
    }
  }
  return row;
}

std::vector<float> dequantize(G type, const std::vector<uint8_t>& row, int64_t n) {
  std::vector<float> out(n);
  find_kernels(type)->dequantize_row(row.data(), out.data(), n);
  return out;
}

std::vector<int64_t> lengths_for(G type) {
  const int64_t bs = type_traits(type).block_size;
  if (bs == 1) return {1, 7, 8, 15, 16, 31, 32, 33, 63, 64, 65, 100, 127, 128, 255, 256, 1000, 4096, 4099};
  if (bs == 32) return {32, 64, 96, 128, 160, 256, 288, 512, 1024, 2080, 4096};
  return {256, 512, 768, 1024, 2048, 4096};
}

// ---------------------------------------------------------------- tables

TEST(QuantKernels, TableCoversEveryType) {
  for (G t : kWeightTypes) {
    const QuantKernels* k = find_kernels(t);
    ASSERT_NE(k, nullptr) << type_name(t);
    EXPECT_EQ(k->type, t);
    EXPECT_NE(k->dequantize_row, nullptr);
    EXPECT_NE(k->vec_dot_ref, nullptr);
    EXPECT_NE(k->vec_dot.dot, nullptr);
    EXPECT_NE(find_kernels(k->vec_dot_type), nullptr) << type_name(k->vec_dot_type);
    EXPECT_NE(find_kernels(k->vec_dot_type)->quantize_row, nullptr) << type_name(k->vec_dot_type);
  }
  EXPECT_EQ(find_kernels(G::Q4_0)->vec_dot_type, G::Q8_0);
  EXPECT_EQ(find_kernels(G::Q5_1)->vec_dot_type, G::Q8_1);
  EXPECT_EQ(find_kernels(G::IQ4_XS)->vec_dot_type, G::Q8_K);
  EXPECT_EQ(find_kernels(G::IQ4_NL)->vec_dot_type, G::Q8_0);
  EXPECT_EQ(find_kernels(G::IQ2_XXS), nullptr);
  const std::string isa = kernel_isa();
  EXPECT_TRUE(isa == "amx" || isa == "avx512-vnni" || isa == "avx512" || isa == "avx2" || isa == "scalar") << isa;
}

// Each entry's block layout is the reader's (the kernels' block structs against gguf's type traits); the
// activation (vec_dot) types convert activations, the weight-only ones do not.
TEST(QuantKernels, EntriesAgreeWithTypeTraits) {
  const G activation_types[] = {G::F32, G::F16, G::BF16, G::Q8_0, G::Q8_1, G::Q8_K};
  for (G t : kWeightTypes) {
    const QuantKernels* k = find_kernels(t);
    ASSERT_NE(k, nullptr) << type_name(t);
    EXPECT_EQ(k->block_size, type_traits(t).block_size) << type_name(t);
    EXPECT_EQ(k->block_bytes, type_traits(t).bytes_per_block) << type_name(t);
    const bool activation =
        std::find(std::begin(activation_types), std::end(activation_types), t) != std::end(activation_types);
    EXPECT_EQ(k->quantize_activations != nullptr, activation) << type_name(t);
  }
  for (G t : activation_types) {
    const QuantKernels* k = find_kernels(t);
    ASSERT_NE(k, nullptr) << type_name(t);
    EXPECT_EQ(k->block_bytes, type_traits(t).bytes_per_block) << type_name(t);
    EXPECT_NE(k->quantize_activations, nullptr) << type_name(t);
  }
  // Types llama.cpp multiplies with other kernels than vec_dot on x86, whatever the instruction set.
  for (G t : {G::Q4_0, G::IQ4_NL, G::Q4_K}) EXPECT_NE(find_kernels(t)->batched_for(256, 64), nullptr) << type_name(t);
  EXPECT_EQ(find_kernels(G::Q6_K)->batched_for(256, 64), nullptr);
}

// ---------------------------------------------------------------- gguf-py dequantization

TEST(QuantDequant, MatchesGgufPyRows) {
  const std::filesystem::path shared(TT_SHARED_DIR);
  const auto index_path = shared / "reference" / "dequant" / "index.json";
  if (!std::filesystem::exists(index_path)) GTEST_SKIP() << "no reference data at " << index_path;
  const nlohmann::json index = nlohmann::json::parse(std::ifstream(index_path));
  int checked = 0;
  for (const auto& entry : index) {
    const std::string model = entry["model"], tensor = entry["tensor"], type_str = entry["type"];
    SCOPED_TRACE(model + " " + tensor + " " + type_str);
    const std::string stem = model.substr(0, model.size() - 5);  // without ".gguf"
    const nlohmann::json map =
        nlohmann::json::parse(std::ifstream(shared / "reference" / "memory-map" / (stem + ".json")));
    const nlohmann::json* info = nullptr;
    for (const auto& t : map["tensors"]) {
      if (t["name"] == tensor) info = &t;
    }
    ASSERT_NE(info, nullptr);
    const auto type = type_from_name(type_str);
    ASSERT_TRUE(type.has_value());
    ASSERT_EQ((*info)["type"], type_str);
    const int64_t ne0 = (*info)["shape"][0];
    ASSERT_EQ(ne0, entry["ne0"].get<int64_t>());
    const int64_t rows = entry["rows"];
    const uint64_t offset = (*info)["offset_start"];
    EXPECT_EQ(offset, entry["byte_offset_in_file"].get<uint64_t>());

    const uint64_t rb = row_bytes(*type, ne0);
    std::vector<uint8_t> bytes(rb * rows);
    std::ifstream model_file(shared / "models" / model, std::ios::binary);
    ASSERT_TRUE(model_file) << "cannot open model " << model;
    model_file.seekg(static_cast<std::streamoff>(offset));
    model_file.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(model_file);

    std::vector<float> want(ne0 * rows);
    std::ifstream want_file(shared / "reference" / "dequant" / entry["file"].get<std::string>(), std::ios::binary);
    want_file.read(reinterpret_cast<char*>(want.data()), static_cast<std::streamsize>(want.size() * sizeof(float)));
    ASSERT_TRUE(want_file);

    const QuantKernels* k = find_kernels(*type);
    ASSERT_NE(k, nullptr);
    std::vector<float> got(ne0 * rows);
    for (int64_t r = 0; r < rows; ++r) k->dequantize_row(bytes.data() + r * rb, got.data() + r * ne0, ne0);
    EXPECT_EQ(first_difference(got.data(), want.data(), ne0 * rows, 1e-6f), -1)
        << describe_difference(got.data(), want.data(), ne0 * rows, 1e-6f);
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(index.size()));
}

// ---------------------------------------------------------------- dot products

// With every scale 1 and small quants, all float operations in any dot product are exact integer arithmetic:
// every path must give exactly the reference's integer result.
TEST(QuantVecDot, FastEqualsReferenceExactlyWithUnitScales) {
  Rng rng;
  for (G t : kWeightTypes) {
    if (type_traits(t).block_size == 1) continue;
    const QuantKernels* k = find_kernels(t);
    for (int64_t n : lengths_for(t)) {
      if (n > 512 && type_traits(t).block_size == kQK_K) continue;  // keep partial sums below 2^24
      const auto x = random_weights(t, n, rng, true);
      const auto y = random_activations(k->vec_dot_type, n, rng, true);
      float want = 0;
      k->vec_dot_ref(n, &want, x.data(), y.data());
      // The dequantized dot, in double: the exact value.
      const auto dx = dequantize(t, x, n), dy = dequantize(k->vec_dot_type, y, n);
      double exact = 0;
      for (int64_t i = 0; i < n; ++i) exact += static_cast<double>(dx[i]) * dy[i];
      EXPECT_EQ(want, exact) << type_name(t) << " n=" << n;
      for (const auto& [name, fn] : fast_impls(t)) {
        float got = 0;
        fn(n, &got, x.data(), y.data());
        EXPECT_EQ(got, want) << type_name(t) << " " << name << " n=" << n;
      }
    }
  }
}

// Sum of |x_i * y_i|: the scale of the float rounding a dot product may carry.
double abs_dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += std::fabs(static_cast<double>(a[i]) * b[i]);
  return s;
}

// Realistic scales: fast paths agree with the reference within float rounding (relative 1e-5 of sum |x*y|), and
// the reference agrees with the dot of the dequantized rows to the same tolerance.
TEST(QuantVecDot, FastMatchesReferenceWithinRounding) {
  Rng rng;
  constexpr double kRelTol = 1e-5;
  int cases = 0;
  for (G t : kWeightTypes) {
    const QuantKernels* k = find_kernels(t);
    for (int64_t n : lengths_for(t)) {
      for (int rep = 0; rep < 3; ++rep) {
        const auto x = random_weights(t, n, rng, false);
        const auto y = random_activations(k->vec_dot_type, n, rng, false);
        const auto dx = dequantize(t, x, n), dy = dequantize(k->vec_dot_type, y, n);
        double tol = kRelTol * abs_dot(dx, dy) + 1e-30;
        if (k->vec_dot_type == G::Q8_1) {
          // Q8_1 carries s = d * sum(q) rounded to fp16; the dot uses m * s: add that rounding.
          const auto* yb = reinterpret_cast<const BlockQ8_1*>(y.data());
          for (int64_t b = 0; b < n / 32; ++b) {
            uint16_t m;
            std::memcpy(&m, x.data() + b * type_traits(t).bytes_per_block + 2, 2);
            tol += std::fabs(fp16_to_fp32(m) * fp16_to_fp32(yb[b].s)) / 1024;
          }
        }
        double exact = 0;
        for (int64_t i = 0; i < n; ++i) exact += static_cast<double>(dx[i]) * dy[i];
        float want = 0;
        k->vec_dot_ref(n, &want, x.data(), y.data());
        EXPECT_NEAR(want, exact, tol) << type_name(t) << " reference vs dequantized, n=" << n;
        for (const auto& [name, fn] : fast_impls(t)) {
          float got = 0;
          fn(n, &got, x.data(), y.data());
          EXPECT_NEAR(got, want, tol) << type_name(t) << " " << name << " n=" << n;
          ++cases;
        }
      }
    }
  }
  EXPECT_GT(cases, 0);
}

// The llama.cpp-order kernels chosen per token (repack gemv/gemm, BF16 tinyBLAS / vec_dot) compute the same dot
// product as the reference, in another float order: within rounding of it.
TEST(QuantVecDot, BatchedKernelsMatchReferenceWithinRounding) {
  Rng rng;
  constexpr double kRelTol = 1e-5;
  int cases = 0;
  const std::pair<G, VecDotFn> kernels[] = {
      {G::Q4_0, ref::repack_dot_q4_0},         {G::IQ4_NL, ref::repack_dot_iq4_nl}, {G::Q4_K, ref::repack_gemv_q4_k},
      {G::Q4_K, ref::repack_gemm_q4_k},        {G::Q2_K, ref::repack_gemv_q2_k},    {G::Q2_K, ref::repack_gemm_q2_k},
      {G::BF16, ref::vec_dot_bf16_avx512bf16}, {G::BF16, ref::dot_bf16_tinyblas},   {G::Q8_0, ref::amx_dot_q8_0},
  };
  for (size_t i = 0; i < std::size(kernels); ++i) {
    const auto& [t, kernel] = kernels[i];
    const QuantKernels* k = find_kernels(t);
    for (int64_t n : {256, 512, 1536}) {
      const auto x = random_weights(t, n, rng, false);
      const auto y = random_activations(k->vec_dot_type, n, rng, false);
      const double tol = kRelTol * abs_dot(dequantize(t, x, n), dequantize(k->vec_dot_type, y, n)) + 1e-30;
      float want = 0, got = 0;
      k->vec_dot_ref(n, &want, x.data(), y.data());
      kernel(n, &got, x.data(), y.data());
      EXPECT_NEAR(got, want, tol) << type_name(t) << " kernel " << i << " n=" << n;
      ++cases;
    }
  }
  EXPECT_EQ(cases, 3 * 9);
}

// The SIMD repack kernels do the integer work in vectors but the float steps one by one as the reference does:
// bit-identical results.
TEST(QuantVecDot, FastRepackKernelsEqualReferenceExactly) {
  Rng rng;
  const auto [avx2, avx512] = cpu_sets();
  if (!avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  struct Case {
    G type;
    VecDotFn ref, fast2, fast512;
  };
  const Case cases[] = {
      {G::Q4_0, ref::repack_dot_q4_0, avx2::repack_dot_q4_0, avx512::repack_dot_q4_0},
      {G::IQ4_NL, ref::repack_dot_iq4_nl, avx2::repack_dot_iq4_nl, avx512::repack_dot_iq4_nl},
      {G::Q4_K, ref::repack_gemv_q4_k, avx2::repack_gemv_q4_k, avx512::repack_gemv_q4_k},
      {G::Q4_K, ref::repack_gemm_q4_k, avx2::repack_gemm_q4_k, avx512::repack_gemm_q4_k},
  };
  for (const Case& c : cases) {
    const QuantKernels* k = find_kernels(c.type);
    for (int64_t n : {256, 768, 2048}) {
      for (int rep = 0; rep < 4; ++rep) {
        const auto x = random_weights(c.type, n, rng, false);
        const auto y = random_activations(k->vec_dot_type, n, rng, false);
        float want = 0, got = 0;
        c.ref(n, &want, x.data(), y.data());
        c.fast2(n, &got, x.data(), y.data());
        EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << type_name(c.type) << " avx2 n=" << n;
        if (avx512) {
          c.fast512(n, &got, x.data(), y.data());
          EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
              << type_name(c.type) << " avx512 n=" << n;
        }
      }
    }
  }
}

// Q2_K's repack orders (llama.cpp's AVX-512 builds repack Q2_K; every CPU reproduces them): the AVX2 and AVX-512
// kernels' integer sums in vectors, float steps as the reference, bit for bit; random rows and the extremes (every
// quant 3 and every scale and min 15 against activations of 127 and -128).
TEST(QuantVecDot, Q2KRepackKernelsEqualReferenceExactly) {
  Rng rng;
  const auto [avx2, avx512] = cpu_sets();
  if (!avx2) GTEST_SKIP() << "no AVX2";
  struct Kernel {
    VecDotFn ref, fast;
    const char* name;
  };
  std::vector<Kernel> kernels = {{ref::repack_gemv_q2_k, avx2::repack_gemv_q2_k, "avx2 gemv"},
                                 {ref::repack_gemm_q2_k, avx2::repack_gemm_q2_k, "avx2 gemm"}};
  if (avx512) {
    kernels.push_back({ref::repack_gemv_q2_k, avx512::repack_gemv_q2_k, "avx512 gemv"});
    kernels.push_back({ref::repack_gemm_q2_k, avx512::repack_gemm_q2_k, "avx512 gemm"});
  }
  for (int64_t n : {256, 768, 2048})
    for (int rep = 0; rep < 6; ++rep) {
      auto x = random_weights(G::Q2_K, n, rng, false);
      auto y = random_activations(G::Q8_K, n, rng, false);
      if (rep >= 4) {  // the extremes
        auto* xb = reinterpret_cast<BlockQ2_K*>(x.data());
        auto* yb = reinterpret_cast<BlockQ8_K*>(y.data());
        for (int64_t i = 0; i < n / kQK_K; ++i) {
          std::fill(std::begin(xb[i].scales), std::end(xb[i].scales), 0xFF);
          std::fill(std::begin(xb[i].qs), std::end(xb[i].qs), 0xFF);
          for (int j = 0; j < kQK_K; ++j) yb[i].qs[j] = rep == 4 ? 127 : -128;
          for (int g = 0; g < kQK_K / 16; ++g) yb[i].bsums[g] = static_cast<int16_t>(16 * yb[i].qs[0]);
        }
      }
      for (const auto& k : kernels) {
        float want = 0, got = 0;
        k.ref(n, &want, x.data(), y.data());
        k.fast(n, &got, x.data(), y.data());
        EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
            << "Q2_K " << k.name << " n=" << n << " rep " << rep << ": " << got << " vs " << want;
      }
    }
}

// The AVX-512 kernels that use 512-bit registers (Q6_K: both halves at once) keep ggml's AVX2 lane values, so
// they equal the AVX2 build bit for bit.
TEST(QuantVecDot, Avx512EqualsAvx2Exactly) {
  Rng rng;
  if (!cpu_sets().avx512) GTEST_SKIP() << "no AVX-512";
  struct Case {
    G type;
    VecDotFn a2, a512;
  };
  const Case cases[] = {{G::Q6_K, avx2::vec_dot_q6_k, avx512::vec_dot_q6_k},
                        {G::Q4_K, avx2::vec_dot_q4_k, avx512::vec_dot_q4_k},
                        {G::Q3_K, avx2::vec_dot_q3_k, avx512::vec_dot_q3_k}};
  for (const Case& c : cases)
    for (int64_t n : {256, 768, 4096})
      for (int rep = 0; rep < 8; ++rep) {
        const auto x = random_weights(c.type, n, rng, false);
        const auto y = random_activations(find_kernels(c.type)->vec_dot_type, n, rng, false);
        float a = 0, b = 0;
        c.a2(n, &a, x.data(), y.data());
        c.a512(n, &b, x.data(), y.data());
        EXPECT_EQ(std::bit_cast<uint32_t>(a), std::bit_cast<uint32_t>(b)) << type_name(c.type) << " n=" << n;
      }
}

// SwiGLU: the SIMD ggml_v_expf gives the scalar lane emulation's floats bit for bit, over ordinary activations,
// the overflow / underflow edges (|x| near 88 and beyond 192 ln 2 ... ) and the libm tail (n % 16).
TEST(QuantActivation, SwigluEqualsReferenceExactly) {
  Rng rng;
  const auto [avx2, avx512] = cpu_sets();
  if (!avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<std::pair<const char*, void (*)(const float*, const float*, float*, int64_t)>> impls = {
      {"avx2", avx2::swiglu_row}};
  if (avx512) impls.push_back({"avx512", avx512::swiglu_row});
  for (int64_t n : {16, 40, 2048, 2051}) {
    std::vector<float> g(n), u(n), want(n), got(n);
    for (int64_t i = 0; i < n; ++i) {
      const int kind = rng.integer(0, 9);
      g[i] = kind == 0   ? rng.uniform(-200.0f, 200.0f)
             : kind == 1 ? rng.uniform(80.0f, 140.0f) * (rng.integer(0, 1) ? 1 : -1)
                         : rng.normal() * 4.0f;
      u[i] = rng.normal();
    }
    ref::swiglu_row(g.data(), u.data(), want.data(), n);
    for (const auto& [name, fn] : impls) {
      fn(g.data(), u.data(), got.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << name << " n=" << n << " i=" << i << " g=" << g[i] << ": " << got[i] << " vs " << want[i];
    }
  }
}

// Softmax rows (router probabilities): within a few ulps of the exact softmax of the float differences x - max
// (ggml_v_expf's error bound is 1.5 ulp), over widths with and without a libm tail (n % 16) and a row of equal
// values. Bit-exactness with llama.cpp is checked end to end by EngineReference on the MoE models.
TEST(QuantActivation, SoftMaxRowIsTheSoftmax) {
  Rng rng;
  for (int64_t n : {8, 16, 32, 60, 64, 128}) {
    std::vector<float> x(n), out(n);
    for (float& v : x) v = rng.normal() * 3.0f;
    soft_max_row(x.data(), out.data(), n);
    const float max = *std::max_element(x.begin(), x.end());
    double z = 0;  // exp of the float differences, as ggml subtracts in float
    for (float v : x) z += std::exp(static_cast<double>(v - max));
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double exact = std::exp(static_cast<double>(x[i] - max)) / z;
      EXPECT_NEAR(out[i], exact, exact * 4e-7) << "n=" << n << " i=" << i;
      total += out[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-6) << "n=" << n;
  }
  std::vector<float> flat(20, 0.5f), out(20);
  soft_max_row(flat.data(), out.data(), 20);
  for (float p : out) EXPECT_FLOAT_EQ(p, 0.05f);
}

// Rotary embedding: the SIMD rotation gives the reference's floats bit for bit (signed zeros included), in both
// pairings, for rotated widths with and without a scalar tail, in place and out of place.
TEST(QuantRope, RotateEqualsReference) {
  Rng rng;
  const auto [avx2, avx512] = cpu_sets();
  if (!avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<std::pair<const char*, void (*)(const float*, float*, const float*, int, bool)>> impls = {
      {"avx2", avx2::rope_rotate}};
  if (avx512) impls.push_back({"avx512", avx512::rope_rotate});
  for (int n_dims : {2, 6, 16, 24, 64, 128}) {
    for (bool neox : {false, true}) {
      std::vector<float> x(n_dims), cs(n_dims);
      for (int i = 0; i < n_dims; ++i) x[i] = i % 7 == 3 ? (i % 2 ? 0.0f : -0.0f) : rng.normal();
      for (int i = 0; i < n_dims; i += 2) {
        const float angle = rng.uniform(-10.0f, 10.0f);
        cs[i] = std::cos(angle);
        cs[i + 1] = i % 6 == 0 ? 0.0f : std::sin(angle);
      }
      std::vector<float> want(n_dims);
      ref::rope_rotate(x.data(), want.data(), cs.data(), n_dims, neox);
      for (const auto& [name, fn] : impls) {
        std::vector<float> got(n_dims, -7.0f), in_place = x;
        fn(x.data(), got.data(), cs.data(), n_dims, neox);
        fn(in_place.data(), in_place.data(), cs.data(), n_dims, neox);
        for (int i = 0; i < n_dims; ++i) {
          ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
              << name << " n_dims=" << n_dims << " neox=" << neox << " i=" << i << ": " << got[i] << " vs " << want[i];
          ASSERT_EQ(std::bit_cast<uint32_t>(in_place[i]), std::bit_cast<uint32_t>(want[i]))
              << name << " in place, n_dims=" << n_dims << " neox=" << neox << " i=" << i;
        }
      }
    }
  }
}

// The attention's libm expf in SIMD lanes gives std::exp's floats bit for bit: every 4099th float (all exponents,
// signs and mantissa patterns), every 61st of a softmax's usual range [-32, -2^-6], and glibc's special cases (the
// edges of overflow and underflow, infinities, NaNs, denormals, zeros). An exhaustive run over all 2^32 inputs
// matched too (docs/performance.md).
TEST(QuantExpf, LibmLanesEqualStdExp) {
  const auto [avx2, avx512] = cpu_sets();
  if (!avx2) GTEST_SKIP() << "no AVX2/FMA";
  std::vector<float> x;
  for (uint64_t b = 0; b <= 0xffffffffu; b += 4099) x.push_back(std::bit_cast<float>(static_cast<uint32_t>(b)));
  for (uint32_t b = std::bit_cast<uint32_t>(-0x1p-6f); b <= std::bit_cast<uint32_t>(-32.0f); b += 61)
    x.push_back(std::bit_cast<float>(b));
  for (float v :
       {0x1.62e42ep+6f, 0x1.62e430p+6f, -0x1.9fe368p+6f, -0x1.9fe36ap+6f, -0x1.9d1d9ep+6f, -0x1.9d1da0p+6f, 88.0f,
        -88.0f,         87.99999f,      -103.5f,         -104.0f,         INFINITY,        -INFINITY,       NAN,
        -NAN,           0.0f,           -0.0f,           0x1p-149f,       -0x1p-149f,      FLT_MAX,         -FLT_MAX,
        FLT_MIN})
    x.push_back(v);
  std::vector<std::pair<const char*, void (*)(const float*, float*, int64_t)>> impls = {{"avx2", avx2::expf_libm_row}};
  if (avx512) impls.push_back({"avx512", avx512::expf_libm_row});
  for (const auto& [name, fn] : impls) {
    std::vector<float> got(x.size());
    fn(x.data(), got.data(), static_cast<int64_t>(x.size()));
    int64_t wrong = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = std::exp(x[i]);
      const bool same =
          std::isnan(want) ? std::isnan(got[i]) : std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want);
      if (!same && wrong++ < 5)
        ADD_FAILURE() << name << " expf(" << std::hexfloat << x[i] << ") = " << got[i] << ", std::exp: " << want;
    }
    EXPECT_EQ(wrong, 0) << name << " of " << x.size();
    // Rows whose length is not a multiple of the 4 lanes.
    for (int64_t n : {1, 3, 5}) {
      std::vector<float> part(n, -7.0f);
      fn(x.data() + 1000, part.data(), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(part[i], std::exp(x[1000 + i])) << name << " n=" << n;
    }
  }
}

// Flash attention: the SIMD kernel gives the scalar reference's floats bit for bit, for head sizes below, at and
// above one vector (and the register-resident sizes 64, 128), 1 to 4 queries per call with their own position
// counts (as the heads of a GQA group and neighbouring tokens are called), 1 to 300 cache positions in a strided
// (GQA) cache; normalised, and as partial results (unnormalised accumulators and softmax states).
TEST(QuantAttention, AttendF16EqualsReference) {
  Rng rng;
  const auto [avx2, avx512] = cpu_sets();
  if (!avx2) GTEST_SKIP() << "no AVX2/F16C";
  // Each llama.cpp build's order (LlamaCppBuild): the reference, and its SIMD kernels.
  using Attend = TT_ATTEND_F16_DECL((*));
  struct Order {
    const char* name;
    Attend reference;
    std::vector<std::pair<const char*, Attend>> impls;
  };
  std::vector<Order> orders = {{"double K.Q", ref::attend_f16, {{"avx2", avx2::attend_f16}}},
                               {"64-element K.Q", ref::attend_f16_simd64, {{"avx2", avx2::attend_f16_simd64}}}};
  if (avx512) {
    orders[0].impls.push_back({"avx512", avx512::attend_f16});
    orders[1].impls.push_back({"avx512", avx512::attend_f16_simd64});
  }
  for (const auto& [order, reference, impls] : orders)
    for (int64_t d : {4, 8, 16, 64, 80, 128}) {
      for (int64_t max_pos : {1, 2, 37, 300}) {
        for (int nq = 1; nq <= kAttendMaxQueries; ++nq) {
          const int64_t kv_heads = 2, stride = kv_heads * d * 2;
          std::vector<uint16_t> k(max_pos * kv_heads * d), v(k.size()), q(nq * d);
          for (auto* h : {&q, &k, &v})
            for (auto& x : *h) x = fp32_to_fp16(rng.normal());
          const auto* kb = reinterpret_cast<const uint8_t*>(k.data()) + d * 2;  // the second KV head
          const auto* vb = reinterpret_cast<const uint8_t*>(v.data()) + d * 2;
          const float scale = 1.0f / std::sqrt(static_cast<float>(d));
          std::vector<const uint16_t*> qs(nq);
          std::vector<int64_t> n_pos(nq);
          std::vector<float> want(nq * d), got(nq * d);
          std::vector<float*> want_out(nq), got_out(nq);
          for (int qi = 0; qi < nq; ++qi) {
            qs[qi] = q.data() + qi * d;
            n_pos[qi] = std::max<int64_t>(1, max_pos - (qi * 7) % (max_pos + 1));  // differing counts, one maximal
            want_out[qi] = want.data() + qi * d;
            got_out[qi] = got.data() + qi * d;
          }
          std::vector<uint16_t> acc(d);
          for (bool partial : {false, true}) {
            SoftmaxState want_state[kAttendMaxQueries], got_state[kAttendMaxQueries];
            reference(nq, qs.data(), n_pos.data(), kb, vb, stride, d, scale, acc.data(), want_out.data(),
                      partial ? want_state : nullptr);
            for (const auto& [name, fn] : impls) {
              std::fill(got.begin(), got.end(), -7.0f);
              fn(nq, qs.data(), n_pos.data(), kb, vb, stride, d, scale, acc.data(), got_out.data(),
                 partial ? got_state : nullptr);
              for (int64_t i = 0; i < nq * d; ++i)
                ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
                    << order << ", " << name << (partial ? " partial" : "") << " d=" << d << " queries=" << nq
                    << " query " << i / d << " (n_pos " << n_pos[i / d] << ") element " << i % d << ": " << got[i]
                    << " vs " << want[i];
              for (int qi = 0; partial && qi < nq; ++qi) {
                EXPECT_EQ(got_state[qi].max_score, want_state[qi].max_score) << name << " query " << qi;
                EXPECT_EQ(got_state[qi].sum, want_state[qi].sum) << name << " query " << qi;
                EXPECT_GT(want_state[qi].sum, 0.0f);
              }
            }
            if (partial) {  // the partial accumulator scaled by 1/S is the normalised result
              reference(nq, qs.data(), n_pos.data(), kb, vb, stride, d, scale, acc.data(), got_out.data(), nullptr);
              for (int qi = 0; qi < nq; ++qi)
                for (int64_t i = 0; i < d; ++i)
                  ASSERT_EQ(want_out[qi][i] * want_state[qi].inverse(), got_out[qi][i])
                      << "query " << qi << " element " << i;
            }
          }
        }
      }
    }
}

// A tile kernel's outputs (out[t * ldo + r], ldo = nr + gap: the gaps must keep their -7) against `dot` per
// (row, token), bit for bit; a mismatch names `what`, the output, its token and row. The tile's outputs go to
// *tile_out when it is given.
using TileCall =
    std::function<void(int64_t, int64_t, int64_t, const void*, uint64_t, const void*, uint64_t, float*, int64_t)>;
void expect_tile_equals_dots(const TileCall& tile, VecDotFn dot, int64_t n, int64_t nr, int64_t nt, const void* x,
                             uint64_t x_row, const void* y, uint64_t y_row, int64_t gap, const std::string& what,
                             std::vector<float>* tile_out = nullptr) {
  const auto* xb = static_cast<const uint8_t*>(x);
  const auto* yb = static_cast<const uint8_t*>(y);
  const int64_t ldo = nr + gap;
  std::vector<float> got(nt * ldo, -7.0f), want(nt * ldo, -7.0f);
  tile(n, nr, nt, x, x_row, y, y_row, got.data(), ldo);
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t r = 0; r < nr; ++r) dot(n, &want[t * ldo + r], xb + r * x_row, yb + t * y_row);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
        << what << " n=" << n << " nr=" << nr << " nt=" << nt << " output " << i << " (token " << i / ldo << ", row "
        << i % ldo << "): " << got[i] << " vs " << want[i];
  if (tile_out) *tile_out = std::move(got);
}

// Tile kernels (many rows per call, lane per row) give exactly what their per-row kernel gives, for row counts
// that are and are not multiples of the 8-row block, and for several tokens with distinct rows.
TEST(QuantVecDot, TileKernelsEqualTheirRowKernelExactly) {
  Rng rng;
  int tiles_seen = 0;
  for (G type : {G::Q4_K, G::Q4_0, G::IQ4_NL, G::Q3_K, G::Q5_K, G::Q6_K, G::IQ4_XS, G::Q8_0, G::Q5_0, G::Q4_1, G::Q5_1,
                 G::F16, G::F32}) {
    const QuantKernels* k = find_kernels(type);
    // F16 and F32 rows also shorter than a SIMD step (a model of width 8) and with a tail after the steps.
    for (int64_t n : type == G::F16 || type == G::F32 ? std::vector<int64_t>{8, 15, 72, 2048}
                                                      : std::vector<int64_t>{256, 768, 2048}) {
      // vec_dot's tile (the Intel build's F16), and the AMD build's batched kernels, which add F16's tinyBLAS order
      // (mul_mat's batched_for).
      const BatchedKernels* batched = batched_for(*k, n, 64, LlamaCppBuild::kAmdAvx512);
      std::vector<DotKernel> dots = {k->vec_dot};
      if (batched) dots = {k->vec_dot, batched->single, batched->batch};
      for (const DotKernel& dot : dots) {
        if (dot.tile) ++tiles_seen;
        // 130 rows: at n = 2048 a lone token's rows past L2, which AVX2's legacy tiles stream one at a time. Token
        // counts with every remainder of the passes of 2, 4 and 8 tokens the tiles take.
        for (auto [nr, nt] : {std::pair<int64_t, int64_t>{1, 1},
                              {8, 1},
                              {13, 1},
                              {130, 1},
                              {5, 2},
                              {8, 4},
                              {13, 3},
                              {24, 6},
                              {11, 7},
                              {16, 9},
                              {9, 10}}) {
          const uint64_t x_row = row_bytes(type, n), y_row = row_bytes(k->vec_dot_type, n);
          std::vector<uint8_t> x, y;
          for (int64_t r = 0; r < nr; ++r) {
            const auto row = random_weights(type, n, rng, false);
            x.insert(x.end(), row.begin(), row.end());
          }
          for (int64_t t = 0; t < nt; ++t) {
            const auto row = random_activations(k->vec_dot_type, n, rng, false);
            y.insert(y.end(), row.begin(), row.end());
          }
          expect_tile_equals_dots([&](int64_t kn, int64_t knr, int64_t knt, const void* kx, uint64_t kx_row,
                                      const void* ky, uint64_t ky_row, float* out,
                                      int64_t ldo) { dot.run_tile(kn, knr, knt, kx, kx_row, ky, ky_row, out, ldo); },
                                  dot.dot, n, nr, nt, x.data(), x_row, y.data(), y_row, 5,
                                  std::string(type_name(type)));
          if (HasFatalFailure()) return;
        }
      }
    }
  }
  if (cpu_sets().avx2) {
    EXPECT_GT(tiles_seen, 0) << "no tile kernel was exercised on this CPU";
  }
}

// A tile kernel of rows stored in groups of 16 and the kernel it must equal per output on the file's rows.
struct GroupedCase {
  std::string name;
  TileFn tile;
  VecDotFn dot;
};

// Rows in groups of 16 (RowGroups): the layout is a permutation of the rows' bytes that ungroups back to them, and
// every case's tile gives its kernel's outputs on the file's rows exactly: whole groups, groups then a tail of fewer
// rows in file order, one token and several, the weights' bytes random (Q8_0's quants over the full range, -128
// included). The activations are the quantizer's (-127..127: at -128 ggml's sign trick wraps, which the tiles' exact
// sums do not).
void expect_grouped_tiles_equal(G type, void (*group)(const void*, void*, int64_t),
                                void (*ungroup)(const void*, void*, int64_t), const std::vector<GroupedCase>& cases,
                                const std::vector<int64_t>& lengths) {
  Rng rng;
  const G act = find_kernels(type)->vec_dot_type;
  for (int64_t n : lengths) {
    const uint64_t x_row = row_bytes(type, n), y_row = row_bytes(act, n);
    for (auto [nr, nt] : {std::pair<int64_t, int64_t>{16, 1}, {16, 2}, {32, 3}, {21, 5}, {5, 2}, {48, 4}, {16, 6}}) {
      std::vector<uint8_t> rows, grouped, y;
      for (int64_t r = 0; r < nr; ++r) {
        const auto row = random_weights(type, n, rng, false);
        rows.insert(rows.end(), row.begin(), row.end());
      }
      for (int64_t t = 0; t < nt; ++t) {
        const auto row = random_activations(act, n, rng, false);
        y.insert(y.end(), row.begin(), row.end());
      }
      grouped = rows;
      std::vector<uint8_t> back(16 * x_row);
      for (int64_t r = 0; r + 16 <= nr; r += 16) {
        group(rows.data() + r * x_row, grouped.data() + r * x_row, n);
        ungroup(grouped.data() + r * x_row, back.data(), n);
        ASSERT_TRUE(std::equal(back.begin(), back.end(), rows.begin() + r * x_row)) << "n=" << n << " group " << r;
      }
      if (nr >= 16) {
        ASSERT_NE(grouped, rows);
        std::vector<uint8_t> a = rows, b = grouped;
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        ASSERT_EQ(a, b) << "the groups hold the rows' bytes";
      }
      for (const auto& [name, tile, dot] : cases) {
        const int64_t ldo = nr + 3;
        std::vector<float> got(nt * ldo, -7.0f), want(nt * ldo, -7.0f);
        tile(n, nr, nt, grouped.data(), x_row, y.data(), y_row, got.data(), ldo);
        for (int64_t t = 0; t < nt; ++t)
          for (int64_t r = 0; r < nr; ++r) dot(n, &want[t * ldo + r], rows.data() + r * x_row, y.data() + t * y_row);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
              << type_name(type) << " " << name << " n=" << n << " nr=" << nr << " nt=" << nt << " token " << i / ldo
              << ", row " << i % ldo << ": " << got[i] << " vs " << want[i];
      }
    }
  }
}

// A type whose groups reproduce its vec_dot: the reference tile against the scalar reference; the table's and
// AVX-512's against the SIMD vec_dot (the records' order).
std::vector<GroupedCase> vec_dot_cases(G type, TileFn ref_tile, VecDotFn ref_dot, TileFn avx512_tile,
                                       VecDotFn avx512_dot) {
  std::vector<GroupedCase> cases = {{"ref", ref_tile, ref_dot}};
  if (const auto& g = find_kernels(type)->row_groups)
    cases.push_back({"table", g->single.tile, find_kernels(type)->vec_dot.dot});
  if (cpu_sets().avx512) cases.push_back({"avx512", avx512_tile, avx512_dot});
  return cases;
}

TEST(QuantRowGroups, Q8_0TilesEqualVecDotOnTheFilesRows) {
  expect_grouped_tiles_equal(
      G::Q8_0, ref::group_rows_q8_0, ref::ungroup_rows_q8_0,
      vec_dot_cases(G::Q8_0, ref::tile_q8_0_rows16, ref::vec_dot_q8_0, avx512::tile_q8_0_rows16, avx512::vec_dot_q8_0),
      {32, 96, 256, 2080});
}

// Q4_1's groups: vec_dot's 8 lanes and its min chain.
TEST(QuantRowGroups, Q4_1TilesEqualVecDotOnTheFilesRows) {
  expect_grouped_tiles_equal(
      G::Q4_1, ref::group_rows_q4_1, ref::ungroup_rows_q4_1,
      vec_dot_cases(G::Q4_1, ref::tile_q4_1_rows16, ref::vec_dot_q4_1, avx512::tile_q4_1_rows16, avx512::vec_dot_q4_1),
      {32, 96, 256, 2080});
}

// Q3_K's groups: vec_dot's 8 lanes, each 32 elements' 16-element scales inside them.
TEST(QuantRowGroups, Q3_KTilesEqualVecDotOnTheFilesRows) {
  expect_grouped_tiles_equal(
      G::Q3_K, ref::group_rows_q3_k, ref::ungroup_rows_q3_k,
      vec_dot_cases(G::Q3_K, ref::tile_q3_k_rows16, ref::vec_dot_q3_k, avx512::tile_q3_k_rows16, avx512::vec_dot_q3_k),
      {256, 512, 2048});
}

// Q4_0's groups reproduce llama.cpp's repacked kernel (one order for every token).
TEST(QuantRowGroups, Q4_0TilesEqualTheRepackedKernel) {
  std::vector<GroupedCase> cases = {{"ref", ref::tile_q4_0_rows16, ref::repack_dot_q4_0}};
  if (cpu_sets().avx2) cases.push_back({"avx2", avx2::tile_q4_0_rows16, ref::repack_dot_q4_0});
  if (cpu_sets().avx512) cases.push_back({"avx512", avx512::tile_q4_0_rows16, ref::repack_dot_q4_0});
  if (const auto& g = find_kernels(G::Q4_0)->row_groups) {
    cases.push_back({"table single", g->single.tile, ref::repack_dot_q4_0});
    cases.push_back({"table batch", g->batch.tile, ref::repack_dot_q4_0});
  }
  expect_grouped_tiles_equal(G::Q4_0, ref::group_rows_q4_0, ref::ungroup_rows_q4_0, cases, {32, 96, 256, 2080});
}

// IQ4_NL's groups reproduce llama.cpp's repacked kernel (one order for every token).
TEST(QuantRowGroups, IQ4_NLTilesEqualTheRepackedKernel) {
  std::vector<GroupedCase> cases = {{"ref", ref::tile_iq4_nl_rows16, ref::repack_dot_iq4_nl}};
  if (cpu_sets().avx512) cases.push_back({"avx512", avx512::tile_iq4_nl_rows16, ref::repack_dot_iq4_nl});
  if (const auto& g = find_kernels(G::IQ4_NL)->row_groups) {
    cases.push_back({"table single", g->single.tile, ref::repack_dot_iq4_nl});
    cases.push_back({"table batch", g->batch.tile, ref::repack_dot_iq4_nl});
  }
  expect_grouped_tiles_equal(G::IQ4_NL, ref::group_rows_iq4_nl, ref::ungroup_rows_iq4_nl, cases, {32, 96, 256, 2080});
}

// Q4_K's groups reproduce llama.cpp's repacked kernels: the gemv (generation, the tokens of a prompt past its last
// group of 4) and the gemm (the rest of a prompt, on AMX tiles).
TEST(QuantRowGroups, Q4_KTilesEqualTheRepackedKernels) {
  std::vector<GroupedCase> cases = {{"ref gemv", ref::tile_q4_k_rows16_gemv, ref::repack_gemv_q4_k},
                                    {"ref gemm", ref::tile_q4_k_rows16_gemm, ref::repack_gemm_q4_k}};
  if (cpu_sets().avx2) {
    cases.push_back({"avx2 gemv", avx2::tile_q4_k_rows16_gemv, ref::repack_gemv_q4_k});
    cases.push_back({"avx2 gemm", avx2::tile_q4_k_rows16_gemm, ref::repack_gemm_q4_k});
  }
  if (cpu_sets().avx512) {
    cases.push_back({"avx512 gemv", avx512::tile_q4_k_rows16_gemv, ref::repack_gemv_q4_k});
    cases.push_back({"avx512 gemm", avx512::tile_q4_k_rows16_gemm, ref::repack_gemm_q4_k});
  }
  if (amx_available()) cases.push_back({"amx gemm", amx::tile_q4_k_rows16_gemm, ref::repack_gemm_q4_k});
  if (const auto& g = find_kernels(G::Q4_K)->row_groups) {
    cases.push_back({"table single", g->single.tile, ref::repack_gemv_q4_k});
    cases.push_back({"table batch", g->batch.tile, ref::repack_gemm_q4_k});
  }
  expect_grouped_tiles_equal(G::Q4_K, ref::group_rows_q4_k, ref::ungroup_rows_q4_k, cases, {256, 512, 2048});
}

// Q2_K's groups reproduce llama.cpp's repacked kernels: the gemv (single tokens) and the gemm (batches).
TEST(QuantRowGroups, Q2_KTilesEqualTheRepackedKernels) {
  std::vector<GroupedCase> cases = {{"ref gemv", ref::tile_q2_k_rows16_gemv, ref::repack_gemv_q2_k},
                                    {"ref gemm", ref::tile_q2_k_rows16_gemm, ref::repack_gemm_q2_k}};
  if (cpu_sets().avx512) {
    cases.push_back({"avx512 gemv", avx512::tile_q2_k_rows16_gemv, ref::repack_gemv_q2_k});
    cases.push_back({"avx512 gemm", avx512::tile_q2_k_rows16_gemm, ref::repack_gemm_q2_k});
  }
  if (const auto& g = find_kernels(G::Q2_K)->row_groups) {
    cases.push_back({"table single", g->single.tile, ref::repack_gemv_q2_k});
    cases.push_back({"table batch", g->batch.tile, ref::repack_gemm_q2_k});
  }
  expect_grouped_tiles_equal(G::Q2_K, ref::group_rows_q2_k, ref::ungroup_rows_q2_k, cases, {256, 512, 2048});
}

// The F16 dot products of the kAmdAvx512 order (ggml_vec_dot_f16's 64-element steps and tinyBLAS's 16-lane
// accumulator) in SIMD against their references, bit for bit, for lengths with and without a tail.
TEST(QuantVecDot, F16Simd64AndTinyblasEqualTheirReferencesExactly) {
  const auto [avx2, avx512] = cpu_sets();
  if (!avx2) GTEST_SKIP() << "no AVX2/F16C";
  Rng rng;
  std::vector<std::tuple<const char*, VecDotFn, VecDotFn>> cases = {
      {"avx2 simd64", avx2::vec_dot_f16_simd64, ref::vec_dot_f16_simd64},
      {"avx2 tinyBLAS", avx2::dot_f16_tinyblas, ref::dot_f16_tinyblas}};
  if (avx512) {
    cases.emplace_back("avx512 simd64", avx512::vec_dot_f16_simd64, ref::vec_dot_f16_simd64);
    cases.emplace_back("avx512 tinyBLAS", avx512::dot_f16_tinyblas, ref::dot_f16_tinyblas);
  }
  for (int64_t n : {16, 48, 63, 64, 80, 128, 200, 2048}) {
    std::vector<uint16_t> x(n), y(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = fp32_to_fp16(rng.normal() * 4);
      y[i] = fp32_to_fp16(rng.normal());
    }
    for (const auto& [name, fast, reference] : cases) {
      if (reference == ref::dot_f16_tinyblas && n % 16 != 0) continue;
      float got = 0, want = 0;
      fast(n, &got, x.data(), y.data());
      reference(n, &want, x.data(), y.data());
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
          << name << " n=" << n << ": " << got << " vs " << want;
    }
  }
}

// Rows of F16 shorter than the SIMD step are all tail: ggml adds their products one by one in double, in order,
// from +0.0, which ref::vec_dot_f16 does for every length. Tiny products first, then +big and -big: in order the
// tiny ones are lost in big (0 at the end), in any other order not, so the order is pinned to the bit.
TEST(QuantVecDot, F16RowsShorterThanAStepSumInOrder) {
  const auto [avx2, avx512] = cpu_sets();
  Rng rng;
  auto u = [&] { return rng.uniform(-2.0f, 2.0f); };
  for (int64_t n : {1, 2, 8, 15}) {
    for (int pattern = 0; pattern < 2; ++pattern) {
      std::vector<uint16_t> x(n), y(n);
      for (int64_t i = 0; i < n; ++i) {
        const bool big = pattern == 1 && n >= 3 && i >= n - 2;
        x[i] = fp32_to_fp16(pattern == 0 ? u() : big ? (i == n - 1 ? -256.0f : 256.0f) : 0x1p-24f);
        y[i] = fp32_to_fp16(pattern == 0 ? u() : big ? 256.0f : 0x1p-24f * static_cast<float>(i + 1));
      }
      float want = 0;
      ref::vec_dot_f16(n, &want, x.data(), y.data());
      std::vector<std::pair<const char*, VecDotFn>> fast;
      if (avx2) fast.emplace_back("avx2", avx2::vec_dot_f16);
      if (avx512) fast.emplace_back("avx512", avx512::vec_dot_f16);
      for (auto [name, dot] : fast) {
        float got = -1;
        dot(n, &got, x.data(), y.data());
        EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
            << name << " n=" << n << " pattern " << pattern << ": " << got << " vs " << want;
      }
    }
  }
}

// The Q4_K gemv tile (generation's kernel) at the integer extremes its packing relies on: nibbles 15, scales and
// mins 63, activations -128 or 127 throughout a block, mixed with random blocks; every output equals the scalar
// reference bit for bit.
TEST(QuantVecDot, Q4KGemvTileAtIntegerExtremes) {
  Rng rng;
  const QuantKernels* k = find_kernels(G::Q4_K);
  constexpr int64_t n = 1024, nr = 16;
  const BatchedKernels* batched = k->batched_for(n, nr);
  ASSERT_NE(batched, nullptr);
  const DotKernel& dot = batched->single;
  const uint64_t x_row = row_bytes(G::Q4_K, n), y_row = row_bytes(G::Q8_K, n);
  for (int pattern = 0; pattern < 4; ++pattern) {
    std::vector<uint8_t> x;
    for (int64_t r = 0; r < nr; ++r) {
      auto row = random_weights(G::Q4_K, n, rng, false);
      auto* blocks = reinterpret_cast<BlockQ4_K*>(row.data());
      for (int64_t b = 0; b < n / kQK_K; ++b)
        if ((b + r + pattern) % 3 != 0) {  // all ones: nibbles 15, scales and mins 63
          std::memset(blocks[b].scales, 0xFF, sizeof(blocks[b].scales));
          std::memset(blocks[b].qs, 0xFF, sizeof(blocks[b].qs));
        }
      x.insert(x.end(), row.begin(), row.end());
    }
    std::vector<uint8_t> y = random_activations(G::Q8_K, n, rng, false);
    auto* ya = reinterpret_cast<BlockQ8_K*>(y.data());
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      if ((b + pattern) % 4 == 3) continue;  // a realistic block
      const int8_t v = (b + pattern) % 2 ? int8_t{-128} : int8_t{127};
      std::fill(std::begin(ya[b].qs), std::end(ya[b].qs), v);
      std::fill(std::begin(ya[b].bsums), std::end(ya[b].bsums), static_cast<int16_t>(16 * v));
    }
    std::vector<float> want(nr);
    for (int64_t r = 0; r < nr; ++r) ref::repack_gemv_q4_k(n, &want[r], x.data() + r * x_row, y.data());
    // The file's rows through the table's kernel, and the rows in a group (RowGroups, whose AVX2 kernel sums a
    // sub-block's parts in int16) through every grouped gemv this CPU runs.
    std::vector<uint8_t> grouped(x.size());
    ref::group_rows_q4_k(x.data(), grouped.data(), n);
    std::vector<std::tuple<const char*, TileFn, const uint8_t*>> tiles = {{"table", nullptr, x.data()}};
    if (cpu_sets().avx2) tiles.emplace_back("avx2 grouped", avx2::tile_q4_k_rows16_gemv, grouped.data());
    if (cpu_sets().avx512) tiles.emplace_back("avx512 grouped", avx512::tile_q4_k_rows16_gemv, grouped.data());
    for (const auto& [name, tile, rows] : tiles) {
      std::vector<float> got(nr, -7.0f);
      if (tile)
        tile(n, nr, 1, rows, x_row, y.data(), y_row, got.data(), nr);
      else
        dot.run_tile(n, nr, 1, rows, x_row, y.data(), y_row, got.data(), nr);
      for (int64_t r = 0; r < nr; ++r)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[r]), std::bit_cast<uint32_t>(want[r]))
            << name << " pattern " << pattern << " row " << r << ": " << got[r] << " vs " << want[r];
    }
  }
}

// Flash-attention steps over an F16 cache: the SIMD versions give the reference's halves bit for bit (the V
// accumulation and rescale are elementwise), and K.Q the same float for attention-sized values (see
// dot_f16_double: the double sums are exact while partial sums stay below 2^5, and round alike far beyond).
TEST(QuantAttention, F16StepsEqualReference) {
  Rng rng;
  const auto [avx2, avx512] = cpu_sets();
  if (!avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  struct Impl {
    const char* name;
    float (*dot)(const uint16_t*, const uint16_t*, int64_t);
    void (*mad)(uint16_t*, const uint16_t*, float, int64_t);
    void (*scale)(uint16_t*, float, int64_t);
  };
  std::vector<Impl> impls = {{"avx2", avx2::dot_f16_double, avx2::mad_f16, avx2::scale_f16}};
  if (avx512) impls.push_back({"avx512", avx512::dot_f16_double, avx512::mad_f16, avx512::scale_f16});
  auto halves = [&](int64_t n, float spread) {
    std::vector<uint16_t> h(n);
    for (auto& v : h) v = fp32_to_fp16(rng.normal() * spread);
    return h;
  };
  for (const Impl& impl : impls) {
    for (int64_t n : {7, 64, 80, 128, 131}) {
      for (int rep = 0; rep < 20; ++rep) {
        const float spread = rep % 2 ? 0.3f : 4.0f;
        const auto k = halves(n, spread), q = halves(n, spread), v = halves(n, spread);
        EXPECT_EQ(std::bit_cast<uint32_t>(impl.dot(k.data(), q.data(), n)),
                  std::bit_cast<uint32_t>(ref::dot_f16_double(k.data(), q.data(), n)))
            << impl.name << " K.Q n=" << n << " rep " << rep;
        auto want = halves(n, spread);
        auto got = want;
        const float s = rng.uniform(0.0f, 1.0f);
        ref::mad_f16(want.data(), v.data(), s, n);
        impl.mad(got.data(), v.data(), s, n);
        EXPECT_EQ(got, want) << impl.name << " mad n=" << n;
        ref::scale_f16(want.data(), s, n);
        impl.scale(got.data(), s, n);
        EXPECT_EQ(got, want) << impl.name << " scale n=" << n;
      }
    }
  }
}

// The tiled path (llama.cpp's prompts of 64 tokens or more): the SIMD tiles give the scalar reference's floats bit
// for bit, over F16 and F32 caches, head sizes 16 to 128, 1 to 64 rows per call with their own position counts
// (ending inside and at the edges of the 64-position tiles, up to four tiles); and the reference is attention:
// within 1e-4 of softmax(K.q * scale) V computed in double.
TEST(QuantAttention, AttendTiledEqualsReference) {
  Rng rng;
  const auto [avx2, avx512] = cpu_sets();
  if (!avx2) GTEST_SKIP() << "no AVX2/F16C";
  std::vector<std::pair<const char*, TT_ATTEND_TILED_DECL((*))>> impls = {{"avx2", avx2::attend_tiled}};
  if (avx512) impls.push_back({"avx512", avx512::attend_tiled});
  for (bool f16 : {true, false}) {
    for (int64_t d : {16, 32, 64, 128}) {
      for (int rows : {1, 5, 64}) {
        const int64_t max_pos = 230, kv_heads = 2, elem = f16 ? 2 : 4, stride = kv_heads * d * elem;
        std::vector<uint8_t> k(max_pos * stride), v(max_pos * stride);
        std::vector<float> kf(max_pos * d), vf(max_pos * d);  // the second KV head's values
        for (auto [cache, values] : {std::pair{&k, &kf}, std::pair{&v, &vf}})
          for (int64_t p = 0; p < max_pos; ++p)
            for (int64_t h = 0; h < kv_heads; ++h)
              for (int64_t i = 0; i < d; ++i) {
                float x = rng.normal();
                uint8_t* at = cache->data() + p * stride + (h * d + i) * elem;
                if (f16) {
                  const uint16_t half = fp32_to_fp16(x);
                  x = fp16_to_fp32(half);
                  std::memcpy(at, &half, 2);
                } else {
                  std::memcpy(at, &x, 4);
                }
                if (h == 1) (*values)[p * d + i] = x;
              }
        std::vector<float> q(rows * d), want(rows * d), got(rows * d);
        for (auto& x : q) x = rng.normal();
        std::vector<const float*> qs(rows);
        std::vector<float*> want_out(rows), got_out(rows);
        std::vector<int64_t> n_pos(rows);
        for (int r = 0; r < rows; ++r) {
          qs[r] = q.data() + r * d;
          want_out[r] = want.data() + r * d;
          got_out[r] = got.data() + r * d;
          const int64_t edges[] = {1, 63, 64, 65, 128, 129, 200, max_pos};
          n_pos[r] = r < 8 ? edges[r] : 1 + (r * 37) % max_pos;
        }
        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        AlignedBuffer scratch;
        scratch.reserve(attend_tiled_scratch_floats(d) * sizeof(float));
        const uint8_t* kb = k.data() + d * elem;
        const uint8_t* vb = v.data() + d * elem;
        AttendTiledArgs args{rows,
                             qs.data(),
                             n_pos.data(),
                             kb,
                             vb,
                             static_cast<uint64_t>(stride),
                             f16,
                             d,
                             scale,
                             reinterpret_cast<float*>(scratch.data()),
                             want_out.data()};
        ref::attend_tiled(args);
        for (int r = 0; r < rows; ++r) {  // the reference against attention in double
          std::vector<double> w(n_pos[r]);
          double m = -INFINITY, sum = 0;
          for (int64_t p = 0; p < n_pos[r]; ++p) {
            double dot = 0;
            for (int64_t i = 0; i < d; ++i) dot += static_cast<double>(q[r * d + i]) * kf[p * d + i];
            w[p] = dot * scale;
            m = std::max(m, w[p]);
          }
          for (auto& x : w) sum += x = std::exp(x - m);
          for (int64_t i = 0; i < d; ++i) {
            double o = 0;
            for (int64_t p = 0; p < n_pos[r]; ++p) o += w[p] * vf[p * d + i];
            ASSERT_NEAR(want[r * d + i], o / sum, 1e-4) << "reference row " << r << " element " << i;
          }
        }
        for (const auto& [name, fn] : impls) {
          std::fill(got.begin(), got.end(), -7.0f);
          args.out = got_out.data();
          fn(args);
          for (int64_t i = 0; i < rows * d; ++i)
            ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
                << name << (f16 ? " F16" : " F32") << " d=" << d << " rows=" << rows << " row " << i / d << " (n_pos "
                << n_pos[i / d] << ") element " << i % d << ": " << got[i] << " vs " << want[i];
        }
      }
    }
  }
}

// Which kernel each token of a batch gets: repack groups of 4 (remainder single), tinyBLAS the whole batch.
TEST(QuantVecDot, BatchedKernelsPerToken) {
  const BatchedKernels repack{BatchedKernels::Grouping::kGroupsOf4,
                              [](int64_t, int64_t) { return true; },
                              {ref::repack_gemv_q4_k},
                              {ref::repack_gemm_q4_k}};
  EXPECT_EQ(repack.for_token(0, 1), repack.single);
  for (int64_t t = 0; t < 3; ++t) EXPECT_EQ(repack.for_token(t, 3), repack.single);
  for (int64_t t = 0; t < 12; ++t) EXPECT_EQ(repack.for_token(t, 13), repack.batch) << t;
  EXPECT_EQ(repack.for_token(12, 13), repack.single);
  const BatchedKernels whole{BatchedKernels::Grouping::kWholeBatch,
                             [](int64_t, int64_t) { return true; },
                             {ref::vec_dot_bf16_avx512bf16},
                             {ref::dot_bf16_tinyblas}};
  EXPECT_EQ(whole.for_token(0, 1), whole.single);
  for (int64_t t = 0; t < 5; ++t) EXPECT_EQ(whole.for_token(t, 5), whole.batch);
  // Shapes llama.cpp does not repack (rows not a multiple of 8) keep the type's vec_dot.
  EXPECT_EQ(find_kernels(G::Q4_K)->batched_for(256, 12), nullptr);
  // Q8_0 keeps vec_dot for every token, except for batches under --kernel-isa amx (tiles; a lone token still takes
  // vec_dot).
  const QuantKernels& q8 = *find_kernels(G::Q8_0);
  if (kernel_isa() == std::string("amx")) {
    ASSERT_NE(q8.batched_for(256, 256), nullptr);
    EXPECT_EQ(q8.batched_for(256, 256)->for_token(0, 1), q8.vec_dot);
    EXPECT_EQ(q8.batched_for(256, 256)->for_token(3, 7), (DotKernel{ref::amx_dot_q8_0, amx::tile_q8_0}));
  } else {
    EXPECT_EQ(q8.batched_for(256, 256), nullptr);
  }
}

constexpr const char* kNoAmx =
    "this CPU has no AMX-INT8 (or Linux refused the tile state): the AMX kernels cannot run here. The project's "
    "machines (Sapphire Rapids class) have it, so this test runs there";

// A Q8_0 matrix of nr rows x n, and nt activation rows, random; optionally every weight and activation quant at
// an extreme (-128, 127 or -127) so the int32 block sums are the largest the blocks allow.
// Weight rows of a 32-element block type (Q8_0, Q4_0, IQ4_NL) and Q8_0 activation rows; with `extremes`, every
// other weight block all at the type's smallest value (extremes 2) or largest (1).
struct Q8Matrices {
  std::vector<uint8_t> x, y;
  Q8Matrices(int64_t n, int64_t nr, int64_t nt, Rng& rng, int extremes, G weights = G::Q8_0) {
    for (int64_t r = 0; r < nr; ++r) {
      auto row = random_weights(weights, n, rng, false);
      if (extremes)
        for (int64_t b = 0; b < n / 32; ++b) {
          if ((b + r) % 2 == 0) continue;
          if (weights == G::Q8_0)
            std::memset(reinterpret_cast<BlockQ8_0*>(row.data())[b].qs, extremes > 1 ? 0x80 : 0x7F, 32);
          else  // nibbles 0 and 15 (BlockIQ4_NL has BlockQ4_0's layout)
            std::memset(reinterpret_cast<BlockQ4_0*>(row.data())[b].qs, extremes > 1 ? 0x00 : 0xFF, 16);
        }
      x.insert(x.end(), row.begin(), row.end());
    }
    for (int64_t t = 0; t < nt; ++t) {
      auto row = random_activations(G::Q8_0, n, rng, false);
      if (extremes)
        for (int64_t b = 0; b < n / 32; ++b)
          if ((b + t) % 3 != 2)
            std::memset(reinterpret_cast<BlockQ8_0*>(row.data())[b].qs, extremes > 1 ? 0x80 : 0x81, 32);
      y.insert(y.end(), row.begin(), row.end());
    }
  }
};

// The AMX tiles of the 32-element blocks, each with the reference of its order.
struct AmxB32 {
  G type;
  TileFn tile;
  VecDotFn reference;
};
const AmxB32 kAmxB32[] = {{G::Q8_0, amx::tile_q8_0, ref::amx_dot_q8_0},
                          {G::Q4_0, amx::tile_repack_q4_0, ref::repack_dot_q4_0},
                          {G::IQ4_NL, amx::tile_repack_iq4_nl, ref::repack_dot_iq4_nl}};

// The AMX tiles of Q8_0, Q4_0 and IQ4_NL give their references bit for bit for every (row, token): rows and tokens
// that are and are not multiples of the 16 of a tile, lengths that are and are not whole chunks of 8 blocks,
// integer extremes.
TEST(QuantAmx, TilesOf32BlocksEqualTheirReferenceExactly) {
  if (!amx_available()) GTEST_SKIP() << kNoAmx;
  Rng rng;
  int cases = 0;
  for (const AmxB32& k : kAmxB32)
    for (int64_t n : {32, 256, 288, 2048})
      for (auto [nr, nt] : {std::pair<int64_t, int64_t>{1, 1},
                            {1, 2},
                            {5, 3},
                            {16, 16},
                            {16, 64},
                            {17, 15},
                            {13, 33},
                            {40, 17},
                            {16, 100}})
        for (int extremes : {0, 1, 2}) {
          const Q8Matrices m(n, nr, nt, rng, extremes, k.type);
          expect_tile_equals_dots(k.tile, k.reference, n, nr, nt, m.x.data(), row_bytes(k.type, n), m.y.data(),
                                  row_bytes(G::Q8_0, n), 3, fmt::format("{} extremes={}", type_name(k.type), extremes));
          if (HasFatalFailure()) return;
          ++cases;
        }
  EXPECT_EQ(cases, 3 * 4 * 9 * 3);
}

// The tile's rows and tokens are read in place with their strides: rows farther apart than their bytes (a
// weight slab's rows, a token's converted row in a wider scratch) give the same outputs.
TEST(QuantAmx, TilesOf32BlocksHonourStrides) {
  if (!amx_available()) GTEST_SKIP() << kNoAmx;
  Rng rng;
  constexpr int64_t n = 512, nr = 19, nt = 21;
  for (const AmxB32& k : kAmxB32) {
    const Q8Matrices m(n, nr, nt, rng, 0, k.type);
    const uint64_t row = row_bytes(k.type, n), x_row = row + 70, a_row = row_bytes(G::Q8_0, n), y_row = a_row + 34;
    std::vector<uint8_t> xs(nr * x_row, 0xCC), ys(nt * y_row, 0xCC);
    for (int64_t r = 0; r < nr; ++r) std::memcpy(xs.data() + r * x_row, m.x.data() + r * row, row);
    for (int64_t t = 0; t < nt; ++t) std::memcpy(ys.data() + t * y_row, m.y.data() + t * a_row, a_row);
    std::vector<float> got(nt * nr), want(nt * nr);
    k.tile(n, nr, nt, xs.data(), x_row, ys.data(), y_row, got.data(), nr);
    k.tile(n, nr, nt, m.x.data(), row, m.y.data(), a_row, want.data(), nr);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
          << type_name(k.type) << " output " << i;
  }
}

// Q4_K prompt batches: "auto" runs the gemm on AMX tiles where the CPU has them (same bits as the AVX-512 tile);
// the tokens llama.cpp sends through gemv keep the AVX-512 gemv.
TEST(QuantAmx, AutoTakesTheQ4_KTileWhereAvailable) {
  if (kernel_isa() != std::string("avx512-vnni")) GTEST_SKIP() << "the table is not at AVX-512 here: " << kernel_isa();
  const BatchedKernels* q4k = find_kernels(G::Q4_K)->batched_for(2048, 256);
  ASSERT_NE(q4k, nullptr);
  EXPECT_EQ(q4k->for_token(0, 13),
            (DotKernel{avx512::repack_gemm_q4_k,
                       amx_available() ? amx::tile_repack_gemm_q4_k : avx512::tile_repack_gemm_q4_k}));
  EXPECT_EQ(q4k->for_token(12, 13), (DotKernel{avx512::repack_gemv_q4_k, avx512::tile_repack_gemv_q4_k}));
  // Q4_0 and IQ4_NL batches likewise (bit-identical: TilesOf32BlocksEqualTheirReferenceExactly).
  const BatchedKernels* q40 = find_kernels(G::Q4_0)->batched_for(2048, 256);
  const BatchedKernels* iq4 = find_kernels(G::IQ4_NL)->batched_for(2048, 256);
  ASSERT_TRUE(q40 && iq4);
  EXPECT_EQ(q40->for_token(0, 13).tile, amx_available() ? amx::tile_repack_q4_0 : avx512::tile_repack_q4_0);
  EXPECT_EQ(iq4->for_token(0, 13).tile, amx_available() ? amx::tile_repack_iq4_nl : avx512::tile_repack_iq4_nl);
  EXPECT_EQ(q40->for_token(12, 13).tile, avx512::tile_repack_q4_0);
  const BatchedKernels* q2k = find_kernels(G::Q2_K)->batched_for(2048, 256);
  ASSERT_NE(q2k, nullptr);
  EXPECT_EQ(q2k->for_token(0, 13),
            (DotKernel{avx512::repack_gemm_q2_k, amx_available() ? amx::tile_repack_gemm_q2_k : nullptr}));
}

// nt Q8_K activation rows of n, random; with `extremes`, most super-blocks are all -128 (extremes 2) or 127
// (extremes 1), their bsums kept consistent: the largest integer sums the blocks allow.
std::vector<uint8_t> q8_k_activations(int64_t n, int64_t nt, Rng& rng, int extremes, int8_t lowest = -128) {
  std::vector<uint8_t> y;
  for (int64_t t = 0; t < nt; ++t) {
    auto row = random_activations(G::Q8_K, n, rng, false);
    if (extremes)
      for (int64_t b = 0; b < n / kQK_K; ++b)
        if ((b + t) % 3 != 2) {
          BlockQ8_K& blk = reinterpret_cast<BlockQ8_K*>(row.data())[b];
          const int8_t q = extremes > 1 ? lowest : 127;
          std::fill(std::begin(blk.qs), std::end(blk.qs), q);
          std::fill(std::begin(blk.bsums), std::end(blk.bsums), static_cast<int16_t>(16 * q));
        }
    y.insert(y.end(), row.begin(), row.end());
  }
  return y;
}

// nr random rows of n `type` weights; with `extremes`, alternate super-blocks of every row (b + r odd) get
// patch(block, high): the type's stored extremes, all high ones or all low ones where `high` says.
template <typename Block, typename Patch>
std::vector<uint8_t> k_quant_rows(G type, int64_t n, int64_t nr, Rng& rng, int extremes, Patch patch) {
  std::vector<uint8_t> x;
  for (int64_t r = 0; r < nr; ++r) {
    auto row = random_weights(type, n, rng, false);
    if (extremes)
      for (int64_t b = 0; b < n / kQK_K; ++b)
        if ((b + r) % 2) patch(reinterpret_cast<Block*>(row.data())[b], (b + r) % 4 == 1);
    x.insert(x.end(), row.begin(), row.end());
  }
  return x;
}

// nr random rows of n `Block` weights and nt Q8_K activation rows (q8_k_activations', their low extreme kLowest);
// with `extremes`, alternate super-blocks of every row get kPatch(block, high, extremes): the type's stored extremes.
template <typename Block, G kType, void (*kPatch)(Block&, bool, int), int8_t kLowest = -128>
struct KQuantMatrices {
  std::vector<uint8_t> x, y;
  KQuantMatrices(int64_t n, int64_t nr, int64_t nt, Rng& rng, int extremes)
      : x(k_quant_rows<Block>(kType, n, nr, rng, extremes,
                              [&](Block& blk, bool high) { kPatch(blk, high, extremes); })),
        y(q8_k_activations(n, nt, rng, extremes, kLowest)) {}
};

// Q4_K: all nibbles 15, all 6-bit scales and mins 63.
void q4_k_extremes(BlockQ4_K& blk, bool, int) {
  std::memset(blk.qs, 0xFF, sizeof(blk.qs));
  std::memset(blk.scales, 0xFF, sizeof(blk.scales));
}
using Q4KMatrices = KQuantMatrices<BlockQ4_K, G::Q4_K, q4_k_extremes>;

// Q2_K: quants 3 or 0, scales and mins 15.
void q2_k_extremes(BlockQ2_K& blk, bool high, int) {
  std::memset(blk.qs, high ? 0xFF : 0x00, sizeof(blk.qs));
  std::memset(blk.scales, 0xFF, sizeof(blk.scales));
}
using Q2KMatrices = KQuantMatrices<BlockQ2_K, G::Q2_K, q2_k_extremes>;

// Q6_K: quants 63 or 0, all scales 127 (extremes 1) or -128 (extremes 2).
void q6_k_extremes(BlockQ6_K& blk, bool high, int extremes) {
  std::memset(blk.ql, high ? 0xFF : 0x00, sizeof(blk.ql));
  std::memset(blk.qh, high ? 0xFF : 0x00, sizeof(blk.qh));
  std::fill(std::begin(blk.scales), std::end(blk.scales), static_cast<int8_t>(extremes > 1 ? -128 : 127));
}
using Q6KMatrices = KQuantMatrices<BlockQ6_K, G::Q6_K, q6_k_extremes>;

// Q5_K: quants 31 or 0, all 6-bit scales and mins 63.
void q5_k_extremes(BlockQ5_K& blk, bool high, int) {
  std::memset(blk.qs, high ? 0xFF : 0x00, sizeof(blk.qs));
  std::memset(blk.qh, high ? 0xFF : 0x00, sizeof(blk.qh));
  std::memset(blk.scales, 0xFF, sizeof(blk.scales));
}
using Q5KMatrices = KQuantMatrices<BlockQ5_K, G::Q5_K, q5_k_extremes>;

// IQ4_XS: levels 113 or -127, scales 31 or -32. Activations down to -127, the lowest Q8_K's quantizer gives: at -128
// vec_dot_iq4_xs's sign trick (ggml's) wraps to +128's negation, which the tile's exact products do not copy.
void iq4_xs_extremes(BlockIQ4_XS& blk, bool high, int) {
  std::memset(blk.qs, high ? 0xFF : 0x00, sizeof(blk.qs));
  std::memset(blk.scales_l, high ? 0xFF : 0x00, sizeof(blk.scales_l));
  blk.scales_h = high ? 0xFFFF : 0x0000;
}
using IQ4XSMatrices = KQuantMatrices<BlockIQ4_XS, G::IQ4_XS, iq4_xs_extremes, -127>;

// The cases of the K-quant AMX tile tests: lengths of 1, 3 and 8 super-blocks; rows and tokens that are and are
// not multiples of the 16 of a tile; random blocks and both kinds of integer extremes. check(n, nr, nt, extremes)
// per case, until a fatal failure; returns the number of cases run.
template <typename Check>
int for_each_k_tile_case(Check check) {
  int cases = 0;
  for (int64_t n : {256, 768, 2048})
    for (auto [nr, nt] : {std::pair<int64_t, int64_t>{1, 1},
                          {1, 2},
                          {5, 3},
                          {8, 4},
                          {16, 16},
                          {16, 64},
                          {17, 15},
                          {13, 33},
                          {40, 17},
                          {16, 100}})
      for (int extremes : {0, 1, 2}) {
        check(n, nr, nt, extremes);
        if (::testing::Test::HasFatalFailure()) return cases;
        ++cases;
      }
  return cases;
}

// A tile kernel's outputs for rows and tokens read in place with their strides (a weight slab's rows, a wider
// activation scratch) equal its outputs for packed rows, bit for bit.
void expect_tile_honours_strides(G type, TileFn tile, int64_t n, int64_t nr, int64_t nt, const std::vector<uint8_t>& x,
                                 const std::vector<uint8_t>& y) {
  const uint64_t xr = row_bytes(type, n), yr = row_bytes(G::Q8_K, n), x_row = xr + 70, y_row = yr + 36;
  std::vector<uint8_t> xs(nr * x_row, 0xCC), ys(nt * y_row, 0xCC);
  for (int64_t r = 0; r < nr; ++r) std::memcpy(xs.data() + r * x_row, x.data() + r * xr, xr);
  for (int64_t t = 0; t < nt; ++t) std::memcpy(ys.data() + t * y_row, y.data() + t * yr, yr);
  std::vector<float> got(nt * nr), want(nt * nr);
  tile(n, nr, nt, xs.data(), x_row, ys.data(), y_row, got.data(), nr);
  tile(n, nr, nt, x.data(), xr, y.data(), yr, want.data(), nr);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << "output " << i;
}

// The AMX Q4_K tile gives ref::repack_gemm_q4_k -- the order of the AVX-512 gemm tile, which "auto" used to run
// and the reference records hold -- bit for bit for every (row, token): rows and tokens that are and are not
// multiples of the 16 of a tile, integer extremes.
TEST(QuantAmx, TileQ4_KEqualsGemmReferenceExactly) {
  if (!amx_available()) GTEST_SKIP() << kNoAmx;
  Rng rng;
  const int cases = for_each_k_tile_case([&](int64_t n, int64_t nr, int64_t nt, int extremes) {
    const Q4KMatrices m(n, nr, nt, rng, extremes);
    const uint64_t x_row = row_bytes(G::Q4_K, n), y_row = row_bytes(G::Q8_K, n);
    const int64_t ldo = nr + 3;
    std::vector<float> got;
    expect_tile_equals_dots(amx::tile_repack_gemm_q4_k, ref::repack_gemm_q4_k, n, nr, nt, m.x.data(), x_row, m.y.data(),
                            y_row, 3, fmt::format("extremes={}", extremes), &got);
    if (::testing::Test::HasFatalFailure()) return;
    if (cpu_sets().avx512 && nr % 8 == 0) {  // and the AVX-512 tile it stands in for, on its shapes
      std::vector<float> simd(nt * ldo, -7.0f);
      avx512::tile_repack_gemm_q4_k(n, nr, nt, m.x.data(), x_row, m.y.data(), y_row, simd.data(), ldo);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(simd[i])) << "avx512 output " << i;
    }
  });
  EXPECT_EQ(cases, 3 * 10 * 3);
}

// The AMX Q2_K tile gives llama.cpp's repacked gemm order (ref::repack_gemm_q2_k) bit for bit.
TEST(QuantAmx, TileQ2_KEqualsGemmReferenceExactly) {
  if (!amx_available()) GTEST_SKIP() << kNoAmx;
  Rng rng;
  const int cases = for_each_k_tile_case([&](int64_t n, int64_t nr, int64_t nt, int extremes) {
    const Q2KMatrices m(n, nr, nt, rng, extremes);
    expect_tile_equals_dots(amx::tile_repack_gemm_q2_k, ref::repack_gemm_q2_k, n, nr, nt, m.x.data(),
                            row_bytes(G::Q2_K, n), m.y.data(), row_bytes(G::Q8_K, n), 3,
                            fmt::format("extremes={}", extremes));
  });
  EXPECT_EQ(cases, 3 * 10 * 3);
}

// expect_tile_honours_strides for a K-quant tile over Matrices' rows and tokens (19 rows, 21 tokens of 512).
template <typename Matrices>
void expect_k_tile_honours_strides(G type, TileFn tile) {
  Rng rng;
  constexpr int64_t n = 512, nr = 19, nt = 21;
  const Matrices m(n, nr, nt, rng, 0);
  expect_tile_honours_strides(type, tile, n, nr, nt, m.x, m.y);
}

TEST(QuantAmx, TileQ2_KHonoursStrides) {
  if (!amx_available()) GTEST_SKIP() << kNoAmx;
  expect_k_tile_honours_strides<Q2KMatrices>(G::Q2_K, amx::tile_repack_gemm_q2_k);
}

// Rows and tokens read in place with their strides (a weight slab's rows, a wider activation scratch).
TEST(QuantAmx, TileQ4_KHonoursStrides) {
  if (!amx_available()) GTEST_SKIP() << kNoAmx;
  expect_k_tile_honours_strides<Q4KMatrices>(G::Q4_K, amx::tile_repack_gemm_q4_k);
}

// Q5_K, Q6_K and IQ4_XS prompt batches: "auto" runs them on AMX tiles where the CPU has them (same bits as the
// AVX-512 kernels), else on the AVX-512 tiles.
TEST(QuantAmx, AutoTakesTheQ5_KAndQ6_KTilesWhereAvailable) {
  if (kernel_isa() != std::string("avx512-vnni")) GTEST_SKIP() << "the table is not at AVX-512 here: " << kernel_isa();
  EXPECT_EQ(find_kernels(G::Q6_K)->vec_dot,
            (DotKernel{avx512::vec_dot_q6_k, amx_available() ? amx::tile_q6_k : avx512::tile_q6_k}));
  EXPECT_EQ(find_kernels(G::Q5_K)->vec_dot,
            (DotKernel{avx512::vec_dot_q5_k, amx_available() ? amx::tile_q5_k : avx512::tile_q5_k}));
  EXPECT_EQ(find_kernels(G::IQ4_XS)->vec_dot,
            (DotKernel{avx512::vec_dot_iq4_xs, amx_available() ? amx::tile_iq4_xs : avx512::tile_iq4_xs}));
}

// An AMX tile of a K-quant gives its AVX-512 dot product (ggml's 8 lanes, the order of the records) bit for bit for
// every (row, token), and the AVX-512 tile it stands in for where there is one, over for_each_k_tile_case's cases.
template <typename Matrices>
void expect_k_tile_equals_vec_dot(G type, TileFn tile, VecDotFn dot, TileFn simd_tile) {
  Rng rng;
  const int cases = for_each_k_tile_case([&](int64_t n, int64_t nr, int64_t nt, int extremes) {
    const Matrices m(n, nr, nt, rng, extremes);
    const uint64_t x_row = row_bytes(type, n), y_row = row_bytes(G::Q8_K, n);
    const int64_t ldo = nr + 3;
    std::vector<float> got(nt * ldo, -7.0f), want(nt * ldo, -7.0f), simd(nt * ldo, -7.0f);
    tile(n, nr, nt, m.x.data(), x_row, m.y.data(), y_row, got.data(), ldo);
    for (int64_t t = 0; t < nt; ++t)
      for (int64_t r = 0; r < nr; ++r) dot(n, &want[t * ldo + r], m.x.data() + r * x_row, m.y.data() + t * y_row);
    if (simd_tile) simd_tile(n, nr, nt, m.x.data(), x_row, m.y.data(), y_row, simd.data(), ldo);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
          << type_name(type) << " n=" << n << " nr=" << nr << " nt=" << nt << " extremes=" << extremes << " output "
          << i << " (token " << i / ldo << ", row " << i % ldo << "): " << got[i] << " vs " << want[i];
      if (simd_tile) {
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(simd[i])) << "avx512 tile output " << i;
      }
    }
  });
  EXPECT_EQ(cases, 3 * 10 * 3);
}

// Rows and tokens that are and are not multiples of the 16 of a tile; quants 0 and 63, scales 127 and -128,
// activations 127 and -128.
TEST(QuantAmx, TileQ6_KEqualsVecDotExactly) {
  if (!amx_available()) GTEST_SKIP() << kNoAmx;
  expect_k_tile_equals_vec_dot<Q6KMatrices>(G::Q6_K, amx::tile_q6_k, avx512::vec_dot_q6_k, avx512::tile_q6_k);
}

// The same for Q5_K: quants 0 and 31, scales and mins 63, activations 127 and -128.
TEST(QuantAmx, TileQ5_KEqualsVecDotExactly) {
  if (!amx_available()) GTEST_SKIP() << kNoAmx;
  expect_k_tile_equals_vec_dot<Q5KMatrices>(G::Q5_K, amx::tile_q5_k, avx512::vec_dot_q5_k, nullptr);
}

// The same for IQ4_XS: levels 113 and -127, scales 31 and -32, activations 127 and -128.
TEST(QuantAmx, TileIQ4_XSEqualsVecDotExactly) {
  if (!amx_available()) GTEST_SKIP() << kNoAmx;
  expect_k_tile_equals_vec_dot<IQ4XSMatrices>(G::IQ4_XS, amx::tile_iq4_xs, avx512::vec_dot_iq4_xs, nullptr);
}

// The AVX-512 IQ4_XS tile, whose batches of 4 tokens or more run 16 rows a register (the panels), on the same cases.
TEST(QuantVecDot, Avx512TileIQ4_XSEqualsVecDotExactly) {
  if (!cpu_sets().avx512) GTEST_SKIP() << "no AVX-512";
  expect_k_tile_equals_vec_dot<IQ4XSMatrices>(G::IQ4_XS, avx512::tile_iq4_xs, avx512::vec_dot_iq4_xs, nullptr);
}

TEST(QuantVecDot, Avx512TileIQ4_XSHonoursStrides) {
  if (!cpu_sets().avx512) GTEST_SKIP() << "no AVX-512";
  expect_k_tile_honours_strides<IQ4XSMatrices>(G::IQ4_XS, avx512::tile_iq4_xs);
}

TEST(QuantAmx, TileIQ4_XSHonoursStrides) {
  if (!amx_available()) GTEST_SKIP() << kNoAmx;
  expect_k_tile_honours_strides<IQ4XSMatrices>(G::IQ4_XS, amx::tile_iq4_xs);
}

TEST(QuantAmx, TileQ5_KHonoursStrides) {
  if (!amx_available()) GTEST_SKIP() << kNoAmx;
  expect_k_tile_honours_strides<Q5KMatrices>(G::Q5_K, amx::tile_q5_k);
}

TEST(QuantAmx, TileQ6_KHonoursStrides) {
  if (!amx_available()) GTEST_SKIP() << kNoAmx;
  expect_k_tile_honours_strides<Q6KMatrices>(G::Q6_K, amx::tile_q6_k);
}

// The scalar VDPBF16PS emulation against the instruction itself, where the CPU has it.
// GCC 12 warns about _mm512_undefined_* inside its own reduce intrinsic (the false positive simd_x86.h
// also silences).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
__attribute__((target("avx512f,avx512bf16"))) float dpbf16_hardware(const uint16_t* x, const uint16_t* y, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 32) {
    const __m512i a = _mm512_loadu_si512(x + i), b = _mm512_loadu_si512(y + i);
    acc = _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
  }
  return _mm512_reduce_add_ps(acc);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

TEST(QuantVecDot, Bf16EmulationMatchesVdpbf16ps) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16")) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  Rng rng;
  for (int rep = 0; rep < 200; ++rep) {
    const int64_t n = 32 * rng.integer(1, 48);
    std::vector<uint16_t> x(n), y(n);
    for (int64_t i = 0; i < n; ++i) {
      // Wide exponents, including denormals and values that cancel, so rounding order and flushing show.
      x[i] = fp32_to_bf16(std::ldexp(rng.normal(), rng.integer(-135, 40)));
      y[i] = fp32_to_bf16(rng.integer(0, 9) == 0 ? 0x1p-130f : std::ldexp(rng.normal(), rng.integer(-20, 20)));
    }
    float emulated = 0;
    ref::dot_bf16_tinyblas(n, &emulated, x.data(), y.data());
    const float hardware = dpbf16_hardware(x.data(), y.data(), n);
    ASSERT_EQ(std::bit_cast<uint32_t>(emulated), std::bit_cast<uint32_t>(hardware))
        << "n=" << n << " emulated " << emulated << " hardware " << hardware;
  }
}

// The AVX2 emulations of VDPBF16PS's orders (what CPUs without the instruction run) against the scalar ones, bit for
// bit, on values whose denormal inputs, flushed sums and cancellations show any departure.
TEST(QuantVecDot, Bf16Avx2EmulationsEqualTheScalarOnesExactly) {
  if (!cpu_sets().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  Rng rng;
  int flushed = 0;  // cases whose inputs hold denormals (read as zero)
  for (int rep = 0; rep < 200; ++rep) {
    const int64_t n = rep < 100 ? 32 * rng.integer(1, 48) : rng.integer(1, 200);
    std::vector<uint16_t> x(n), y(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = fp32_to_bf16(std::ldexp(rng.normal(), rng.integer(-135, 40)));
      y[i] = fp32_to_bf16(rng.integer(0, 9) == 0 ? 0x1p-130f : std::ldexp(rng.normal(), rng.integer(-20, 20)));
      flushed += (x[i] & 0x7F80u) == 0 && (x[i] & 0x7Fu) != 0;
    }
    float got = 0, want = 0;
    avx2::vec_dot_bf16_dp(n, &got, x.data(), y.data());
    ref::vec_dot_bf16_avx512bf16(n, &want, x.data(), y.data());
    ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
        << "vec_dot n=" << n << ": " << got << " vs " << want;
    if (n % 32 != 0) continue;
    avx2::dot_bf16_tinyblas(n, &got, x.data(), y.data());
    ref::dot_bf16_tinyblas(n, &want, x.data(), y.data());
    ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
        << "tinyBLAS n=" << n << ": " << got << " vs " << want;
  }
  EXPECT_GT(flushed, 0);
}

// The AVX2 BF16 tiles take FMAs where the operands' exponents make them exact (fma_exact in floats_avx2.cpp), the
// emulation elsewhere: both orders' tiles against the scalar emulations, bit for bit, on operands whose smallest
// exponents sit either side of the bound (products and sums near 2^-126, cancelling pairs) and whose largest ones
// either side of overflow.
TEST(QuantVecDot, Bf16Avx2TilesEqualTheScalarOrdersExactly) {
  if (!cpu_sets().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  Rng rng;
  // Values 2^(base .. base + 8) with random signs and mantissas, one in ten zero; every other odd element nearly
  // cancels its even neighbour (one unit of the mantissa apart).
  auto values = [&](int64_t n, int base) {
    std::vector<uint16_t> v(n);
    for (int64_t i = 0; i < n; ++i) {
      const float f = (rng.integer(0, 1) ? -1.0f : 1.0f) * (1.0f + rng.integer(0, 127) / 128.0f);
      v[i] = rng.integer(0, 9) == 0 ? 0 : fp32_to_bf16(std::ldexp(f, base + rng.integer(0, 8)));
      if (i % 4 == 1 && v[i - 1] != 0) v[i] = static_cast<uint16_t>((v[i - 1] ^ 0x8000) + rng.integer(0, 1));
    }
    return v;
  };
  // The test's own account of the bound, to show both sides were exercised.
  auto exponents = [](const std::vector<uint16_t>& v, int& lo, int& hi) {
    for (uint16_t h : v)
      if ((h & 0x7FFF) != 0) lo = std::min(lo, (h >> 7) & 0xFF), hi = std::max(hi, (h >> 7) & 0xFF);
  };
  int fused = 0, emulated = 0;
  for (int rep = 0; rep < 120; ++rep) {
    const bool high = rep % 3 == 2;  // near overflow, else near the denormals
    const int bx = high ? rng.integer(50, 64) : rng.integer(-72, -40);
    const int by = high ? rng.integer(50, 64) : rng.integer(-72, -40);
    const int64_t nr = rng.integer(1, 5), nt = rng.integer(1, 5), n = 32 * rng.integer(1, 6), pad = 3;
    const uint64_t row = (n + pad) * sizeof(uint16_t);
    std::vector<uint16_t> x, y;
    int xlo = 255, xhi = 0, ylo = 255, yhi = 0;
    for (int64_t r = 0; r < nr; ++r) {
      const auto v = values(n + pad, bx);
      exponents(std::vector<uint16_t>(v.begin(), v.begin() + n), xlo, xhi);
      x.insert(x.end(), v.begin(), v.end());
    }
    for (int64_t t = 0; t < nt; ++t) {
      const auto v = values(n + pad, by);
      exponents(std::vector<uint16_t>(v.begin(), v.begin() + n), ylo, yhi);
      y.insert(y.end(), v.begin(), v.end());
    }
    (xlo >= 1 && ylo >= 1 && xlo + ylo >= 142 && xhi + yhi <= 380 ? fused : emulated) += 1;
    expect_tile_equals_dots(avx2::tile_bf16_tinyblas, ref::dot_bf16_tinyblas, n, nr, nt, x.data(), row, y.data(), row,
                            2, "tinyBLAS tile");
    if (HasFatalFailure()) return;
    // ggml_vec_dot_bf16's order, with a tail after its 64-element steps.
    expect_tile_equals_dots(avx2::tile_bf16_dp, ref::vec_dot_bf16_avx512bf16, n + pad, nr, nt, x.data(), row, y.data(),
                            row, 2, "vec_dot tile");
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(fused, 10);
  EXPECT_GT(emulated, 10);
}

// The VDPBF16PS kernels against their scalar emulations, bit for bit: ggml_vec_dot_bf16 (any n: 64-element steps and a
// tail), tinyBLAS's dot and its tiles (ragged rows and tokens, strided rows, every block shape up to 4 x 4).
TEST(QuantVecDot, Bf16KernelsEqualTheirEmulationsExactly) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16")) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  Rng rng;
  auto values = [&](int64_t n, bool activations) {
    std::vector<uint16_t> v(n);
    for (uint16_t& h : v)
      h = activations
              ? fp32_to_bf16(rng.integer(0, 9) == 0 ? 0x1p-130f : std::ldexp(rng.normal(), rng.integer(-20, 20)))
              : fp32_to_bf16(std::ldexp(rng.normal(), rng.integer(-135, 40)));
    return v;
  };
  for (int64_t n : {1, 31, 32, 64, 65, 96, 127, 448, 2048}) {
    const auto x = values(n, false), y = values(n, true);
    float got = 0, want = 0;
    avx512bf16::vec_dot_bf16(n, &got, x.data(), y.data());
    ref::vec_dot_bf16_avx512bf16(n, &want, x.data(), y.data());
    ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << "vec_dot n=" << n;
    if (n % 32 != 0) continue;
    avx512bf16::dot_bf16_tinyblas(n, &got, x.data(), y.data());
    ref::dot_bf16_tinyblas(n, &want, x.data(), y.data());
    ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << "tinyBLAS n=" << n;
  }
  for (auto [nr, nt] : {std::pair<int64_t, int64_t>{1, 1}, {4, 4}, {5, 3}, {7, 9}, {16, 6}, {13, 11}}) {
    const int64_t n = 160, pad = 3;  // rows of n + pad values: strides other than the row length
    const uint64_t row = (n + pad) * sizeof(uint16_t);
    std::vector<uint16_t> x, y;
    for (int64_t r = 0; r < nr; ++r) {
      const auto v = values(n + pad, false);
      x.insert(x.end(), v.begin(), v.end());
    }
    for (int64_t t = 0; t < nt; ++t) {
      const auto v = values(n + pad, true);
      y.insert(y.end(), v.begin(), v.end());
    }
    expect_tile_equals_dots(avx512bf16::tile_bf16_tinyblas, ref::dot_bf16_tinyblas, n, nr, nt, x.data(), row, y.data(),
                            row, 2, "BF16 tile");
    if (HasFatalFailure()) return;
  }
}

TEST(QuantVecDot, RowsHelperMatchesSingleDots) {
  Rng rng;
  for (G t : {G::Q4_K, G::Q6_K, G::Q8_0, G::Q4_0, G::F32}) {
    const QuantKernels* k = find_kernels(t);
    const int64_t n = 512, nrows = 5;
    std::vector<uint8_t> w;
    for (int r = 0; r < nrows; ++r) {
      const auto row = random_weights(t, n, rng, false);
      w.insert(w.end(), row.begin(), row.end());
    }
    const auto y = random_activations(k->vec_dot_type, n, rng, false);
    std::vector<float> got(nrows), want(nrows);
    vec_dot_rows(*k, n, nrows, got.data(), w.data(), row_bytes(t, n), y.data());
    for (int r = 0; r < nrows; ++r) k->vec_dot.dot(n, &want[r], w.data() + r * row_bytes(t, n), y.data());
    EXPECT_EQ(first_difference(got.data(), want.data(), nrows, 0.0f), -1)
        << type_name(t) << ": " << describe_difference(got.data(), want.data(), nrows, 0.0f);
  }
}

// ---------------------------------------------------------------- quantizers

std::vector<float> random_floats(int64_t n, Rng& rng) {
  std::vector<float> f(n);
  for (float& v : f) v = rng.normal() * rng.uniform(0.01f, 10.0f);
  return f;
}

// Round trips of activation types: error at most half a quantization step (plus the scale's own rounding).
TEST(QuantQuantize, ActivationRoundTrips) {
  Rng rng;
  const int64_t n = 1024;
  for (G t : {G::Q8_0, G::Q8_1, G::Q8_K}) {
    const QuantKernels* k = find_kernels(t);
    const int64_t bs = type_traits(t).block_size;
    for (int rep = 0; rep < 20; ++rep) {
      auto f = random_floats(n, rng);
      if (rep == 0) std::fill(f.begin(), f.begin() + bs, 0.0f);  // an all-zero block
      std::vector<uint8_t> q(row_bytes(t, n));
      k->quantize_row(f.data(), q.data(), n);
      const auto back = dequantize(t, q, n);
      for (int64_t b = 0; b < n / bs; ++b) {
        float amax = 0;
        for (int64_t j = 0; j < bs; ++j) amax = std::max(amax, std::fabs(f[b * bs + j]));
        const float tol = amax / 127 * 0.5f + amax * 2e-3f + 1e-30f;  // half a step + fp16 scale error
        EXPECT_EQ(first_difference(back.data() + b * bs, f.data() + b * bs, bs, tol), -1)
            << type_name(t) << " block " << b << ": "
            << describe_difference(back.data() + b * bs, f.data() + b * bs, bs, tol);
      }
      if (t == G::Q8_1) {  // s = sum(q) * d with d = amax / 127 before its fp16 rounding
        const auto* blocks = reinterpret_cast<const BlockQ8_1*>(q.data());
        for (int64_t b = 0; b < n / 32; ++b) {
          int sum = 0;
          for (int8_t v : blocks[b].qs) sum += v;
          float amax = 0;
          for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(f[b * 32 + j]));
          EXPECT_EQ(blocks[b].s, fp32_to_fp16(sum * (amax / 127)));
        }
      }
      if (t == G::Q8_K) {
        const auto* blocks = reinterpret_cast<const BlockQ8_K*>(q.data());
        for (int64_t b = 0; b < n / kQK_K; ++b) {
          for (int j = 0; j < 16; ++j) {
            int sum = 0;
            for (int l = 0; l < 16; ++l) sum += blocks[b].qs[16 * j + l];
            EXPECT_EQ(blocks[b].bsums[j], sum);
          }
          for (int8_t v : blocks[b].qs) EXPECT_GE(v, -127);
        }
      }
    }
  }
  // Float activation types.
  auto f = random_floats(n, rng);
  for (G t : {G::F32, G::F16, G::BF16}) {
    std::vector<uint8_t> q(row_bytes(t, n));
    find_kernels(t)->quantize_row(f.data(), q.data(), n);
    const auto back = dequantize(t, q, n);
    const float rel = t == G::F32 ? 0.0f : t == G::F16 ? 1.0f / 2048 : 1.0f / 256;
    for (int64_t i = 0; i < n; ++i) EXPECT_LE(std::fabs(back[i] - f[i]), rel * std::fabs(f[i])) << type_name(t);
  }
}

// ggml's x86 activation quantizers (127/amax, round half to even): SIMD versions give identical bytes to the
// scalar model of them, and differ from the *_ref quantizers by at most one step.
TEST(QuantQuantize, X86ActivationQuantizersMatch) {
  Rng rng;
  for (int64_t n : {32, 64, 256, 1024, 4096}) {
    const auto f = random_floats(n, rng);
    for (G t : {G::Q8_0, G::Q8_1}) {
      const size_t bytes = row_bytes(t, n);
      std::vector<uint8_t> model(bytes), got(bytes), reference(bytes);
      (t == G::Q8_0 ? ref::quantize_q8_0_x86 : ref::quantize_q8_1_x86)(f.data(), model.data(), n);
      quantize_activations(t, f.data(), got.data(), n);
      EXPECT_EQ(got, model) << type_name(t) << " n=" << n;
      find_kernels(t)->quantize_row(f.data(), reference.data(), n);
      const size_t qs_offset = t == G::Q8_0 ? 2 : 4, bb = t == G::Q8_0 ? 34 : 36;
      for (size_t b = 0; b < bytes / bb; ++b) {
        for (size_t j = 0; j < 32; ++j) {
          const int a = static_cast<int8_t>(got[b * bb + qs_offset + j]);
          const int r = static_cast<int8_t>(reference[b * bb + qs_offset + j]);
          EXPECT_LE(std::abs(a - r), 1);
        }
      }
    }
    // Q8_K, F16, BF16, F32: the references.
    for (G t : {G::Q8_K, G::F16, G::BF16, G::F32}) {
      std::vector<uint8_t> a(row_bytes(t, n)), b(row_bytes(t, n));
      quantize_activations(t, f.data(), a.data(), n);
      find_kernels(t)->quantize_row(f.data(), b.data(), n);
      EXPECT_EQ(a, b) << type_name(t);
    }
  }
  EXPECT_THROW(quantize_activations(G::Q4_K, nullptr, nullptr, 256), std::exception);
}

// Weight quantizers (for building test fixtures): round trip within the type's step size.
// The SIMD Q8_K quantizers give the reference's bytes, including the block edge cases: equal magnitudes of both
// signs (the first one sets the scale's sign), an all-zero block, and rounding ties.
TEST(QuantQuantize, Q8KSimdEqualsReference) {
  Rng rng;
  const auto [avx2, avx512] = cpu_sets();
  if (!avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<float> f(256 * 6);
  for (float& v : f) v = rng.normal() * 3.0f;
  f[17] = -9.5f, f[200] = 9.5f;                                 // block 0: -9.5 first
  f[256 + 3] = 9.5f, f[256 + 100] = -9.5f;                      // block 1: +9.5 first
  std::fill(f.begin() + 512, f.begin() + 768, 0.0f);            // block 2: zeros
  for (int j = 0; j < 256; ++j) f[768 + j] = (j - 128) * 0.5f;  // block 3: many .5 ties
  for (int j = 0; j < 256; ++j) f[1024 + j] = j % 7 == 0 ? -127.0f : static_cast<float>(j % 5);
  std::vector<uint8_t> want(row_bytes(G::Q8_K, 1536)), got(want.size());
  ref::quantize_q8_k(f.data(), want.data(), 1536);
  avx2::quantize_q8_k(f.data(), got.data(), 1536);
  EXPECT_EQ(got, want) << "avx2";
  if (avx512) {
    std::fill(got.begin(), got.end(), 0);
    avx512::quantize_q8_k(f.data(), got.data(), 1536);
    EXPECT_EQ(got, want) << "avx512";
  }
}

TEST(QuantQuantize, WeightRoundTrips) {
  Rng rng;
  const int64_t n = 2048;
  const std::pair<G, float> cases[] = {{G::Q4_0, 1.0f / 8},  {G::Q4_1, 1.0f / 15},  {G::Q5_0, 1.0f / 16},
                                       {G::Q5_1, 1.0f / 31}, {G::Q8_0, 1.0f / 127}, {G::IQ4_NL, 1.0f / 6}};
  for (const auto& [t, step] : cases) {
    const auto f = random_floats(n, rng);
    std::vector<uint8_t> q(row_bytes(t, n));
    find_kernels(t)->quantize_row(f.data(), q.data(), n);
    const auto back = dequantize(t, q, n);
    double err2 = 0, sig2 = 0;
    for (int64_t b = 0; b < n / 32; ++b) {
      float lo = f[b * 32], hi = f[b * 32], amax = 0;
      for (int j = 0; j < 32; ++j) {
        lo = std::min(lo, f[b * 32 + j]);
        hi = std::max(hi, f[b * 32 + j]);
        amax = std::max(amax, std::fabs(f[b * 32 + j]));
      }
      const float range = (t == G::Q4_1 || t == G::Q5_1) ? hi - lo : amax;
      // Half a step, or a whole one at the end the symmetric types clip (their scale is max / -levels).
      const float tol = range * step * 1.01f + range * 2e-3f;
      EXPECT_EQ(first_difference(back.data() + b * 32, f.data() + b * 32, 32, tol), -1)
          << type_name(t) << " block " << b << ": "
          << describe_difference(back.data() + b * 32, f.data() + b * 32, 32, tol);
    }
    for (int64_t i = 0; i < n; ++i) {
      err2 += (back[i] - f[i]) * (back[i] - f[i]);
      sig2 += f[i] * f[i];
    }
    EXPECT_LT(std::sqrt(err2 / sig2), 2 * step) << type_name(t);
  }
}

// ---------------------------------------------------------------- fp16 / bf16

// Straightforward models of the formats.
float half_model(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
  float v;
  if (exp == 31) {
    v = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);
  } else {
    v = std::ldexp(static_cast<float>(mant + 1024), exp - 25);
  }
  return sign ? -v : v;
}

TEST(Fp16, HalfToFloatExhaustive) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> row(65536);
  fp16_to_fp32_row(all.data(), row.data(), 65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = fp16_to_fp32(static_cast<uint16_t>(h));
    const float want = half_model(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
      // Sign and payload kept, made quiet.
      ASSERT_EQ(std::bit_cast<uint32_t>(got),
                (static_cast<uint32_t>(h & 0x8000) << 16) | 0x7FC00000u | (static_cast<uint32_t>(h & 0x3FF) << 13))
          << h;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << "half 0x" << std::hex << h;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(row[h]), std::bit_cast<uint32_t>(got)) << "row, half " << h;
    // Every non-NaN half survives the round trip.
    if (!std::isnan(got)) {
      ASSERT_EQ(fp32_to_fp16(got), h) << h;
    }
  }
}

// fp32 -> fp16 against the compiler's _Float16 conversion (round to nearest even) and the tie cases.
TEST(Fp16, FloatToHalfRounding) {
  // Midpoints between consecutive halves round to even; one float ulp either side rounds to the nearer.
  for (uint32_t h = 0; h < 0x7BFF; ++h) {
    const float a = half_model(static_cast<uint16_t>(h)), b = half_model(static_cast<uint16_t>(h + 1));
    const float mid = (a + b) / 2;  // exact in float
    const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    ASSERT_EQ(fp32_to_fp16(mid), even) << "midpoint above half " << h;
    ASSERT_EQ(fp32_to_fp16(-mid), even | 0x8000) << "negative midpoint above half " << h;
    ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, 0.0f)), h) << h;
    ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, 1e30f)), h + 1) << h;
  }
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::quiet_NaN()), 0x7E00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::quiet_NaN()), 0xFE00);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);                        // tie to even (zero)
  EXPECT_EQ(fp32_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);  // just above the tie
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);                        // 1.5 ulp -> 2 (even)
  EXPECT_EQ(fp32_to_fp16(1e-30f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);

  // Random floats over the whole range, against _Float16 and the row (F16C) version.
  std::mt19937 gen(7);
  std::vector<float> f(1 << 20);
  for (float& v : f) {
    v = std::bit_cast<float>(static_cast<uint32_t>(gen()));
    if (std::isnan(v)) v = 1.0f;
  }
  for (size_t i = 0; i < f.size(); i += 3) f[i] = std::ldexp(f[i] - std::trunc(f[i]), gen() % 40 - 28);  // near halves
  std::vector<uint16_t> row(f.size());
  fp32_to_fp16_row(f.data(), row.data(), static_cast<int64_t>(f.size()));
  for (size_t i = 0; i < f.size(); ++i) {
    const uint16_t want = std::bit_cast<uint16_t>(static_cast<_Float16>(f[i]));
    ASSERT_EQ(fp32_to_fp16(f[i]), want) << "float bits " << std::bit_cast<uint32_t>(f[i]);
    ASSERT_EQ(row[i], want) << "row, float bits " << std::bit_cast<uint32_t>(f[i]);
  }
}

uint16_t bf16_model(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40);
  if (std::isinf(f)) return static_cast<uint16_t>(x >> 16);
  const uint16_t lo = static_cast<uint16_t>(x >> 16);
  const double below = bf16_to_fp32(lo);
  const double above = static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(lo + 1) << 16));
  const double dl = std::fabs(static_cast<double>(f) - below);
  double du = std::fabs(above - static_cast<double>(f));
  if (std::isinf(above)) du = std::ldexp(1.0, 128) - std::fabs(static_cast<double>(f));  // rounds up to infinity
  if (dl < du || (dl == du && (lo & 1) == 0)) return lo;
  return static_cast<uint16_t>(lo + 1);
}

TEST(Fp16, Bf16Conversions) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(h));
    ASSERT_EQ(std::bit_cast<uint32_t>(f), h << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(fp32_to_bf16(f), h);
    }
  }
  std::mt19937 gen(9);
  for (int i = 0; i < (1 << 20); ++i) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(gen()));
    ASSERT_EQ(fp32_to_bf16(f), bf16_model(f)) << "float bits " << std::bit_cast<uint32_t>(f);
  }
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie to even (down)
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3F818000u)), 0x3F82);  // tie to even (up)
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x7F800001u)), 0x7FC0);  // signalling NaN made quiet
}

// The instruction-set cap of `run`/`bench --kernel-isa` applies only before the kernel table is built; later it
// may only confirm what is in use. Unknown names are refused.
TEST(KernelIsa, LimitAfterTheTableIsBuiltOnlyConfirms) {
  const std::string in_use = kernel_isa();  // builds the table (if no test did before)
  EXPECT_NO_THROW(limit_kernel_isa("auto"));
  EXPECT_THROW(limit_kernel_isa("sse9"), Error);
  if (in_use != "scalar") {
    EXPECT_THROW(limit_kernel_isa("scalar"), Error);
  }
  EXPECT_NE(in_use, "amx");
  // amx: never chosen by auto; confirmed where it is in use, else refused (no AMX on the CPU, or the table is
  // already built).
  if (in_use == "amx") {
    EXPECT_NO_THROW(limit_kernel_isa("amx"));
    EXPECT_THROW(limit_kernel_isa("avx512"), Error);
  } else {
    EXPECT_THROW(limit_kernel_isa("amx"), Error);
  }
  EXPECT_EQ(kernel_isa(), in_use);
}

}  // namespace
}  // namespace tt
