// vec_dot per weight type: scalar reference vs the fast path this CPU uses. One activation row against a matrix of
// weight rows (n = 4096, 512 rows: a few MB, beyond L2 for most types); bytes/s count weight bytes only.
#include <benchmark/benchmark.h>

#include <cstring>
#include <deque>
#include <random>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/fp16.h"
#include "core/mapped_file.h"
#include "quant/kernels.h"
#include "quant/quant.h"

namespace tt {
namespace {

constexpr int64_t kN = 4096;
constexpr int64_t kRows = 512;

struct Fixture {
  std::vector<uint8_t> weights;
  std::vector<uint8_t> act;
  uint64_t row_bytes = 0;
};

// Byte offsets of the fp16 scales in the K-quant and IQ4_XS blocks (see quant/blocks.h).
std::vector<uint64_t> half_fields(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K:
      return {80, 82};
    case GgmlType::Q3_K:
      return {108};
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return {0, 2};
    case GgmlType::Q6_K:
      return {208};
    default:
      return {0};
  }
}

const Fixture& fixture(GgmlType type) {
  static std::deque<std::pair<GgmlType, Fixture>> cache;  // deque: references stay valid
  for (const auto& [t, f] : cache) {
    if (t == type) return f;
  }
  const QuantKernels* k = find_kernels(type);
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  std::vector<float> src(kN);
  Fixture f;
  f.row_bytes = tt::row_bytes(type, kN);
  f.weights.resize(f.row_bytes * kRows);
  for (int64_t r = 0; r < kRows; ++r) {
    if (k->quantize_row) {
      for (float& v : src) v = normal(gen);
      k->quantize_row(src.data(), f.weights.data() + r * f.row_bytes, kN);
    } else {  // K-quants: random bits with small fp16 scales (speed does not depend on the values)
      uint8_t* row = f.weights.data() + r * f.row_bytes;
      for (uint64_t i = 0; i < f.row_bytes; ++i) row[i] = static_cast<uint8_t>(gen());
      const uint64_t bb = type_traits(type).bytes_per_block;
      for (uint64_t b = 0; b < f.row_bytes / bb; ++b) {
        for (uint64_t off : half_fields(type)) {
          const uint16_t h = fp32_to_fp16(0.01f * normal(gen));
          std::memcpy(row + b * bb + off, &h, 2);
        }
      }
    }
  }
  for (float& v : src) v = normal(gen);
  f.act.resize(tt::row_bytes(k->vec_dot_type, kN));
  quantize_activations(k->vec_dot_type, src.data(), f.act.data(), kN);
  cache.emplace_back(type, std::move(f));
  return cache.back().second;
}

void run(benchmark::State& state, GgmlType type, bool fast) {
  const QuantKernels* k = find_kernels(type);
  const Fixture& f = fixture(type);
  const VecDotFn fn = fast ? k->vec_dot.dot : k->vec_dot_ref;
  std::vector<float> out(kRows);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r) fn(kN, &out[r], f.weights.data() + r * f.row_bytes, f.act.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(f.weights.size()));
  state.SetLabel(fast ? kernel_isa() : "reference");
}

// Prompt-sized matrix product as mul_mat tiles it: 512 weight rows x 64 tokens through the kernel mul_mat takes,
// 16-row tiles, over the first n of each row's 4096 elements (the benchmark's argument: a small model's rows are
// 256 long, where a tile's start and end weigh more); items/s counts multiply-adds.
void gemm_with(benchmark::State& state, GgmlType type, const DotKernel& dot, const char* label) {
  const QuantKernels* k = find_kernels(type);
  const Fixture& f = fixture(type);
  constexpr int64_t kTokens = 64, kRowTile = 16;
  const int64_t n = state.range(0);
  // Rows of n elements one after another, as in a model of that width (rows kN apart would share cache sets).
  const uint64_t x_row = tt::row_bytes(type, n), y_row = tt::row_bytes(k->vec_dot_type, n);
  std::vector<uint8_t> weights(x_row * kRows), acts(y_row * kTokens);
  for (int64_t r = 0; r < kRows; ++r)
    std::memcpy(weights.data() + r * x_row, f.weights.data() + r * f.row_bytes, x_row);
  for (int64_t t = 0; t < kTokens; ++t) std::memcpy(acts.data() + t * y_row, f.act.data(), y_row);
  std::vector<float> out(kRows * kTokens);
  for (auto _ : state) {
    for (int64_t r0 = 0; r0 < kRows; r0 += kRowTile)
      dot.run_tile(n, kRowTile, kTokens, weights.data() + r0 * x_row, x_row, acts.data(), y_row, out.data() + r0,
                   kRows);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n * kRows * kTokens);
  state.SetLabel(label);
}
// Gemm's row lengths: a 1B-class model's 4096 and a small model's 256.
void row_lengths(benchmark::internal::Benchmark* b) { b->ArgName("n")->Arg(4096)->Arg(256); }
void gemm(benchmark::State& state, GgmlType type) {
  const QuantKernels* k = find_kernels(type);
  const BatchedKernels* batched = batched_for(*k, kN, kRows, default_llamacpp_build());
  gemm_with(state, type, batched ? batched->for_token(0, 64) : k->vec_dot, kernel_isa());
}
// A prompt tile per instruction set, whichever the table chose: AVX-512 VNNI and AMX side by side.
void gemm_avx512(benchmark::State& state, GgmlType type, DotKernel dot) {
  if (!__builtin_cpu_supports("avx512vnni")) return state.SkipWithError("no AVX-512 VNNI on this CPU");
  gemm_with(state, type, dot, "avx512-vnni");
}
void gemm_amx(benchmark::State& state, GgmlType type, DotKernel dot) {
  if (!amx_available()) return state.SkipWithError("no AMX-INT8 on this CPU (or the OS refused the tile state)");
  gemm_with(state, type, dot, "amx");
}

void quantize_act(benchmark::State& state, GgmlType type) {
  std::vector<float> src(kN);
  std::mt19937 gen(2);
  std::normal_distribution<float> normal;
  for (float& v : src) v = normal(gen);
  std::vector<uint8_t> dst(tt::row_bytes(type, kN));
  for (auto _ : state) {
    quantize_activations(type, src.data(), dst.data(), kN);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kN * 4);
}

// Flash attention over an F16 cache of n_pos positions, head size 64, 4 KV heads as in the main model:
// range(1) queries of one KV head per call (its GQA group has 3). items/s counts (query, position) pairs.
void attend(benchmark::State& state) {
  const int64_t n_pos = state.range(0), d = 64, kv_heads = 4;
  const int nq = static_cast<int>(state.range(1));
  std::mt19937 gen(3);
  std::normal_distribution<float> normal;
  std::vector<uint16_t> q(nq * d), k(n_pos * kv_heads * d), v(k.size()), acc(d);
  for (auto* h : {&q, &k, &v})
    for (auto& x : *h) x = fp32_to_fp16(normal(gen));
  std::vector<float> out(nq * d);
  std::vector<const uint16_t*> qs;
  std::vector<float*> outs;
  for (int qi = 0; qi < nq; ++qi) {
    qs.push_back(q.data() + qi * d);
    outs.push_back(out.data() + qi * d);
  }
  const std::vector<int64_t> positions(nq, n_pos);
  const uint64_t stride = kv_heads * d * sizeof(uint16_t);
  for (auto _ : state) {
    attend_f16(nq, qs.data(), positions.data(), reinterpret_cast<const uint8_t*>(k.data()),
               reinterpret_cast<const uint8_t*>(v.data()), stride, d, 0.125f, acc.data(), outs.data(), nullptr);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n_pos * nq);
  state.SetLabel(kernel_isa());
}
// llama.cpp's tiled attention (prompts of 64 tokens or more): 64 queries (16 tokens of a GQA group of 4) of one KV
// head over an F16 cache, head size range(1), each query attending to range(0) positions (one unit of a prompt of
// that length). items/s counts (query, position) pairs.
void attend_tiled_unit(benchmark::State& state) {
  const int64_t n_pos = state.range(0), d = state.range(1), kv_heads = 2;
  std::mt19937 gen(3);
  std::normal_distribution<float> normal;
  std::vector<float> q(kTileRows * d), out(kTileRows * d);
  std::vector<uint16_t> k(n_pos * kv_heads * d), v(k.size());
  for (auto* h : {&k, &v})
    for (auto& x : *h) x = fp32_to_fp16(normal(gen));
  for (auto& x : q) x = normal(gen);
  std::vector<const float*> qs;
  std::vector<float*> outs;
  for (int64_t r = 0; r < kTileRows; ++r) {
    qs.push_back(q.data() + r * d);
    outs.push_back(out.data() + r * d);
  }
  const std::vector<int64_t> positions(kTileRows, n_pos);
  AlignedBuffer scratch(attend_tiled_scratch_floats(d) * sizeof(float));
  const AttendTiledArgs args{static_cast<int>(kTileRows),
                             qs.data(),
                             positions.data(),
                             reinterpret_cast<const uint8_t*>(k.data()),
                             reinterpret_cast<const uint8_t*>(v.data()),
                             static_cast<uint64_t>(kv_heads * d * sizeof(uint16_t)),
                             true,
                             d,
                             0.125f,
                             reinterpret_cast<float*>(scratch.data()),
                             outs.data()};
  for (auto _ : state) {
    attend_tiled(args);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n_pos * kTileRows);
  state.SetLabel(kernel_isa());
}
BENCHMARK(attend_tiled_unit)
    ->Name("AttendTiled")
    ->ArgNames({"positions", "d"})
    ->ArgsProduct({{128, 512}, {32, 64, 128}});

// Generation's matrix-vector product: one token through the kernel a lone token gets, over a matrix of `rows` rows
// (n = 4096), `per_call` rows a call (16: a tile; 0: all of them in one call, as mul_mat gives a lone token a
// thread's whole chunk of rows). 512 rows stay in the caches (the kernel's own speed); 131072 rows (0.3-1.1 GB)
// stream from memory (compare with `tensortrace bench --bandwidth`'s one-thread figure). bytes/s of
// weights. The large matrix repeats the fixture's rows (speed does not depend on the values).
// `grouped`: the rows stored in groups of 16 (RowGroups) where the loader stores them so, with the kernel a lone token
// gets on them.
void gemv(benchmark::State& state, GgmlType type, bool grouped) {
  const QuantKernels* k = find_kernels(type);
  const Fixture& f = fixture(type);
  const int64_t rows = state.range(0), per_call = state.range(1) == 0 ? rows : state.range(1);
  if (grouped && !k->groups_rows(kN, rows)) return state.SkipWithError("this CPU does not store these rows in groups");
  std::vector<uint8_t> source = f.weights;  // the fixture's rows, grouped where asked
  if (grouped)
    for (int64_t g = 0; g < kRows; g += kRowGroup)
      k->row_groups->group(f.weights.data() + g * f.row_bytes, source.data() + g * f.row_bytes, kN);
  HugePageMemory weights(f.row_bytes * rows);  // as a model's weights are held (FileResidency::IN_MEMORY)
  for (int64_t r = 0; r < rows; r += kRows)
    std::memcpy(weights.data() + r * f.row_bytes, source.data(), f.row_bytes * std::min(kRows, rows - r));
  const BatchedKernels* batched = k->batched_for(kN, rows);
  const DotKernel& dot = grouped   ? k->row_groups->for_token(batched, 0, 1)
                         : batched ? batched->for_token(0, 1)
                                   : k->vec_dot;
  std::vector<float> out(rows);
  for (auto _ : state) {
    for (int64_t r0 = 0; r0 < rows; r0 += per_call)
      dot.run_tile(kN, per_call, 1, weights.data() + r0 * f.row_bytes, f.row_bytes, f.act.data(), 0, out.data() + r0,
                   rows);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(weights.size()));
  state.SetLabel(kernel_isa());
}

BENCHMARK(attend)->Name("AttendF16")->ArgNames({"positions", "queries"})->ArgsProduct({{128, 2048}, {1, 3, 4}});

const int kRegistered = [] {
  const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,   GgmlType::Q4_1,
                            GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K,   GgmlType::Q3_K,
                            GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS};
  for (GgmlType t : types) {
    const std::string name(type_name(t));
    benchmark::RegisterBenchmark(("VecDot/" + name + "/ref").c_str(), run, t, false);
    benchmark::RegisterBenchmark(("VecDot/" + name + "/fast").c_str(), run, t, true);
  }
  for (GgmlType t : {GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                     GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    benchmark::RegisterBenchmark(("Gemm/" + std::string(type_name(t))).c_str(), gemm, t)->Apply(row_lengths);
  }
  // stories260K's weights: rows of 64 and 172 (a tail after the 32-element steps).
  benchmark::RegisterBenchmark("Gemm/F32", gemm, GgmlType::F32)->ArgName("n")->Arg(4096)->Arg(256)->Arg(172)->Arg(64);
  benchmark::RegisterBenchmark("Gemm/Q8_0/avx512", gemm_avx512, GgmlType::Q8_0,
                               DotKernel{avx512::vec_dot_q8_0, avx512::tile_q8_0})
      ->Apply(row_lengths);
  benchmark::RegisterBenchmark("Gemm/Q8_0/amx", gemm_amx, GgmlType::Q8_0, DotKernel{ref::amx_dot_q8_0, amx::tile_q8_0})
      ->Apply(row_lengths);
  benchmark::RegisterBenchmark("Gemm/Q4_K/avx512", gemm_avx512, GgmlType::Q4_K,
                               DotKernel{avx512::repack_gemm_q4_k, avx512::tile_repack_gemm_q4_k})
      ->Apply(row_lengths);
  benchmark::RegisterBenchmark("Gemm/Q4_K/amx", gemm_amx, GgmlType::Q4_K,
                               DotKernel{avx512::repack_gemm_q4_k, amx::tile_repack_gemm_q4_k})
      ->Apply(row_lengths);
  benchmark::RegisterBenchmark("Gemm/Q5_K/avx512", gemm_avx512, GgmlType::Q5_K, DotKernel{avx512::vec_dot_q5_k})
      ->Apply(row_lengths);
  benchmark::RegisterBenchmark("Gemm/Q5_K/amx", gemm_amx, GgmlType::Q5_K,
                               DotKernel{avx512::vec_dot_q5_k, amx::tile_q5_k})
      ->Apply(row_lengths);
  benchmark::RegisterBenchmark("Gemm/Q6_K/avx512", gemm_avx512, GgmlType::Q6_K,
                               DotKernel{avx512::vec_dot_q6_k, avx512::tile_q6_k})
      ->Apply(row_lengths);
  benchmark::RegisterBenchmark("Gemm/Q6_K/amx", gemm_amx, GgmlType::Q6_K,
                               DotKernel{avx512::vec_dot_q6_k, amx::tile_q6_k})
      ->Apply(row_lengths);
  for (GgmlType t : {GgmlType::BF16, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0})
    for (bool grouped : {false, true}) {
      if (grouped && !find_kernels(t)->row_groups) continue;
      const std::string name = "Gemv/" + std::string(type_name(t)) + (grouped ? "/grouped" : "");
      benchmark::RegisterBenchmark(name.c_str(), gemv, t, grouped)
          ->ArgNames({"rows", "per_call"})
          ->ArgsProduct({{512, 131072}, {16, 0}})
          ->MinTime(1.0);
    }
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K, GgmlType::F16}) {
    benchmark::RegisterBenchmark(("QuantizeActivations/" + std::string(type_name(t))).c_str(), quantize_act, t);
  }
  return 0;
}();

}  // namespace
}  // namespace tt
