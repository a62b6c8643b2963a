#include "graph/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "core/work_split.h"
#include "quant/quant.h"

namespace tt {
namespace {

// f(chunk) for this thread's share of chunks 0..n_chunks-1: taken from the node's shared counter when there is
// one (a slower thread takes fewer), else every nth chunk.
template <typename F>
void for_each_chunk(const ComputeContext& ctx, int64_t n_chunks, F f) {
  if (ctx.chunk_counter == nullptr || ctx.nth == 1) {
    for (int64_t c = ctx.ith; c < n_chunks; c += ctx.nth) f(c);
    return;
  }
  for (int64_t c = ctx.next_chunk(); c < n_chunks; c = ctx.next_chunk()) f(c);
}

// n units' chunks for nth threads. The smallest chunks are 1/64 of the units, at most 8 (a large output projection's
// last chunks then cost a few microseconds, not tens).
ShrinkingChunks shrinking_chunks(int64_t n, int nth) { return {n, nth, std::min<int64_t>(n / 64, 8)}; }

// MUL_MAT's units of work: tiles of 16 output rows (a tile of grouped rows is one group).
int64_t row_tiles(int64_t rows) { return (rows + kRowGroup - 1) / kRowGroup; }

// f(begin, end) for this thread's chunks of n units (ShrinkingChunks; without a shared counter, every nth chunk).
template <typename F>
void for_each_shrinking_chunk(const ComputeContext& ctx, int64_t n, F f) {
  ShrinkingChunks chunks = shrinking_chunks(n, ctx.nth);
  const bool shared = ctx.chunk_counter != nullptr && ctx.nth > 1;
  for (int64_t c = ctx.ith;; c = shared ? ctx.nth + ctx.next_chunk() : c + ctx.nth) {
    const Range r = chunks.chunk(c);
    if (r.begin == r.end) return;
    f(r.begin, r.end);
  }
}

const float* row_f32(const Tensor& t, int64_t r) { return t.as<const float>() + r * t.ne[0]; }
float* row_f32_mut(const Tensor& t, int64_t r) { return t.as<float>() + r * t.ne[0]; }

void get_rows(const Node& n, const ComputeContext& ctx) {
  const Tensor& table = *n.src[0];
  const Tensor& out = *n.out;
  const QuantKernels* k = find_kernels(table.type);
  TT_CHECK(k != nullptr, "GET_ROWS from {} table '{}'", type_name(table.type), table.name);
  TT_CHECK(!table.rows_grouped, "GET_ROWS from '{}', whose rows are stored in groups", table.name);
  const auto& rows = n.params.rows;
  Range r = split(static_cast<int64_t>(rows.size()), ctx.ith, ctx.nth);
  for (int64_t i = r.begin; i < r.end; ++i) {
    const uint8_t* src = table.data + static_cast<uint64_t>(rows[i]) * table.row_size();
    k->dequantize_row(src, row_f32_mut(out, i), table.ne[0]);
  }
}

void rms_norm(const Node& n, const ComputeContext& ctx) {
  const Tensor& x = *n.src[0];
  const int64_t ne0 = x.ne[0];
  Range r = split(x.n_rows(), ctx.ith, ctx.nth);
  for (int64_t i = r.begin; i < r.end; ++i) {
    const float* in = row_f32(x, i);
    float* out = row_f32_mut(*n.out, i);
    double sum = 0.0;  // as ggml: squares summed in double
    for (int64_t j = 0; j < ne0; ++j) sum += static_cast<double>(in[j] * in[j]);
    const float mean = static_cast<float>(sum / ne0);
    const float scale = 1.0f / std::sqrt(mean + n.params.eps);
    for (int64_t j = 0; j < ne0; ++j) out[j] = in[j] * scale;
  }
}

// out = a (op) b, b broadcast over a's rows when it has fewer, or one value of b per row of a.
template <typename Op>
void binary(const Node& n, const ComputeContext& ctx, Op op) {
  const Tensor& a = *n.src[0];
  const Tensor& b = *n.src[1];
  const int64_t ne0 = a.ne[0];
  const int64_t b_rows = b.n_rows();
  const bool per_row = b.ne[0] == 1 && ne0 != 1;
  Range r = split(a.n_rows(), ctx.ith, ctx.nth);
  for (int64_t i = r.begin; i < r.end; ++i) {
    const float* pa = row_f32(a, i);
    const float* pb = row_f32(b, i % b_rows);
    float* out = row_f32_mut(*n.out, i);
    if (per_row)
      for (int64_t j = 0; j < ne0; ++j) out[j] = op(pa[j], pb[0]);
    else
      for (int64_t j = 0; j < ne0; ++j) out[j] = op(pa[j], pb[j]);
  }
}

// out = f(x) elementwise.
template <typename F>
void unary(const Node& n, const ComputeContext& ctx, F f) {
  const Tensor& x = *n.src[0];
  Range r = split(x.n_rows(), ctx.ith, ctx.nth);
  for (int64_t i = r.begin; i < r.end; ++i) {
    const float* in = row_f32(x, i);
    float* out = row_f32_mut(*n.out, i);
    for (int64_t j = 0; j < x.ne[0]; ++j) out[j] = f(in[j]);
  }
}

// ggml_compute_forward_soft_max_f32 without mask or scale (soft_max_row in quant.h).
void soft_max(const Node& n, const ComputeContext& ctx) {
  const Tensor& x = *n.src[0];
  Range r = split(x.n_rows(), ctx.ith, ctx.nth);
  for (int64_t i = r.begin; i < r.end; ++i) soft_max_row(row_f32(x, i), row_f32_mut(*n.out, i), x.ne[0]);
}

// Per row: indices of the k largest values, largest first; equal values keep index order (a stable sort).
void top_k(const Node& n, const ComputeContext& ctx) {
  const Tensor& x = *n.src[0];
  const int64_t ne0 = x.ne[0], k = n.params.k;
  int32_t* order = reinterpret_cast<int32_t*>(ctx.thread_scratch);  // [ne0]
  Range r = split(x.n_rows(), ctx.ith, ctx.nth);
  for (int64_t i = r.begin; i < r.end; ++i) {
    const float* in = row_f32(x, i);
    for (int64_t j = 0; j < ne0; ++j) order[j] = static_cast<int32_t>(j);
    std::stable_sort(order, order + ne0, [&](int32_t a, int32_t b) { return in[a] > in[b]; });
    std::copy(order, order + k, n.out->as<int32_t>() + i * k);
  }
}

// GET_ROWS with the ids of another op: out[s, t] = x[ids[s, t], t].
void get_rows_per_token(const Node& n, const ComputeContext& ctx) {
  const Tensor& x = *n.src[0];
  const Tensor& ids = *n.src[1];
  const int64_t k = ids.ne[0];
  Range r = split(ids.n_rows(), ctx.ith, ctx.nth);
  for (int64_t t = r.begin; t < r.end; ++t) {
    const int32_t* id = ids.as<const int32_t>() + t * k;
    for (int64_t s = 0; s < k; ++s) {
      TT_CHECK(id[s] >= 0 && id[s] < x.ne[0], "GET_ROWS '{}': id {} outside {}", n.out->name, id[s], x.ne[0]);
      n.out->as<float>()[t * k + s] = row_f32(x, t)[id[s]];
    }
  }
}

// ggml_vec_sum_f32: summed in double.
void sum_rows(const Node& n, const ComputeContext& ctx) {
  const Tensor& x = *n.src[0];
  Range r = split(x.n_rows(), ctx.ith, ctx.nth);
  for (int64_t i = r.begin; i < r.end; ++i) {
    const float* in = row_f32(x, i);
    double sum = 0.0;
    for (int64_t j = 0; j < x.ne[0]; ++j) sum += static_cast<double>(in[j]);
    n.out->as<float>()[i] = static_cast<float>(sum);
  }
}

// ADD with one input [n, k, n_tokens]: the slots added in order, as llama.cpp's chain of ADDs.
void add_slots(const Node& n, const ComputeContext& ctx) {
  const Tensor& x = *n.src[0];
  const int64_t ne0 = x.ne[0], k = x.ne[1];
  Range r = split(x.ne[2], ctx.ith, ctx.nth);
  for (int64_t t = r.begin; t < r.end; ++t) {
    float* out = row_f32_mut(*n.out, t);
    std::copy(row_f32(x, t * k), row_f32(x, t * k) + ne0, out);
    for (int64_t s = 1; s < k; ++s) {
      const float* in = row_f32(x, t * k + s);
      for (int64_t j = 0; j < ne0; ++j) out[j] += in[j];
    }
  }
}

size_t converted_row_bytes(const Node& n) {
  const QuantKernels* k = find_kernels(n.src[0]->type);
  if (!k || k->vec_dot_type == GgmlType::F32) return 0;
  return row_bytes(k->vec_dot_type, n.src[1]->ne[0]);
}

// out[t][r] = dot(W row r, x row t). Activations are first converted to the weight's vec_dot_type (shared
// scratch, split over threads); then output rows are split over threads, each weight row meeting every token
// while it is in cache.
void mul_mat(const Node& n, const ComputeContext& ctx) {
  const Tensor& w = *n.src[0];
  const Tensor& x = *n.src[1];
  const Tensor& out = *n.out;
  const QuantKernels* k = find_kernels(w.type);
  TT_CHECK(k != nullptr, "MUL_MAT with {} weight '{}'", type_name(w.type), w.name);
  const int64_t K = w.ne[0], N = w.ne[1], M = x.n_rows();
  const uint8_t* y = x.data;
  uint64_t y_row = x.row_size();
  if (k->vec_dot_type != GgmlType::F32) {
    y_row = converted_row_bytes(n);
    if (!ctx.input_converted) {  // else the previous product left this very conversion in scratch
      Range r = split(M, ctx.ith, ctx.nth);
      for (int64_t t = r.begin; t < r.end; ++t)
        quantize_activations(k->vec_dot_type, row_f32(x, t), ctx.scratch + t * y_row, K);
      ctx.barrier();
    }
    y = ctx.scratch;
  }
  const uint64_t w_row = w.row_size();
  // Weights llama.cpp multiplies with other kernels than vec_dot get the same kernel per token (see BatchedKernels).
  const BatchedKernels* batched = batched_for(*k, K, N, ctx.llamacpp_build);
  auto dot_for = [&](int64_t t) -> const DotKernel& {
    if (w.rows_grouped) return k->row_groups->for_token(batched, t, M);
    return batched == nullptr ? k->vec_dot : batched->for_token(t, M);
  };
  float* dst = out.as<float>();
  // Output rows in chunks of whole 16-row tiles, shrinking as the rows run out (ShrinkingChunks): a thread the
  // machine slows down takes fewer instead of holding the others at the barrier. Every output is computed the same
  // way whichever thread takes it.
  constexpr int64_t kRowTile = kRowGroup, kTokTile = 64;
  for_each_shrinking_chunk(ctx, row_tiles(N), [&](int64_t tile_begin, int64_t tile_end) {
    const int64_t rows_begin = tile_begin * kRowTile, rows_end = std::min(N, tile_end * kRowTile);
    if (M == 1) {
      dot_for(0).run_tile(K, rows_end - rows_begin, 1, w.data + rows_begin * w_row, w_row, y, y_row, dst + rows_begin,
                          N);
      return;
    }
    // Tiles of weight rows x tokens: the tile's weight rows stay in cache while every token of the tile uses them.
    // Within a tile, runs of tokens that use the same kernel go to it together.
    for (int64_t t0 = 0; t0 < M; t0 += kTokTile) {
      const int64_t t1 = std::min(M, t0 + kTokTile);
      for (int64_t r0 = rows_begin; r0 < rows_end; r0 += kRowTile) {
        const int64_t r1 = std::min(rows_end, r0 + kRowTile);
        for (int64_t t = t0; t < t1;) {
          const DotKernel& dot = dot_for(t);
          int64_t run_end = t + 1;
          while (run_end < t1 && dot_for(run_end) == dot) ++run_end;
          dot.run_tile(K, r1 - r0, run_end - t, w.data + r0 * w_row, w_row, y + t * y_row, y_row, dst + t * N + r0, N);
          t = run_end;
        }
      }
    }
  });
}

}  // namespace

std::span<const uint8_t> first_weight_bytes(const Node& n, int ith, int nth, size_t max_bytes) {
  if (n.op != OpKind::MUL_MAT || nth < 2) return {};
  const Tensor& w = *n.src[0];
  const int64_t N = w.ne[1];
  const Range r = shrinking_chunks(row_tiles(N), nth).chunk(ith);  // mul_mat's chunk ith: thread ith's first
  const uint64_t begin = static_cast<uint64_t>(std::min(N, r.begin * kRowGroup)) * w.row_size();
  const uint64_t end = static_cast<uint64_t>(std::min(N, r.end * kRowGroup)) * w.row_size();
  return {w.data + begin, std::min<size_t>(end - begin, max_bytes)};
}

namespace {

// The dot product MUL_MAT_ID uses for a weight: llama.cpp multiplies repacked expert weights (see BatchedKernels)
// one token at a time, with the kernel a lone token gets.
const DotKernel& mul_mat_id_dot(const QuantKernels& k, const Tensor& w, LlamaCppBuild build) {
  const BatchedKernels* batched = batched_for(k, w.ne[0], w.ne[1], build);
  return batched ? batched->single : k.vec_dot;
}

// Which (token, slot) pairs chose each expert, grouped by expert (as ggml's mul_mat_id): start[n_expert + 1]
// (prefix offsets), then the pairs t * k + s in token order, then n_expert running positions. At the start of
// thread_scratch (expert_scratch).
struct ExpertGroups {
  const int32_t* start;   // [n_expert + 1]
  const int32_t* pairs;   // [k * n_tokens]
  const int32_t* active;  // the experts with at least one pair, ascending
  int64_t n_active;
};
ExpertGroups group_by_expert(const Tensor& ids, int64_t n_expert, int32_t* mem) {
  const int64_t n = ids.n_elements();
  const int32_t* id = ids.as<const int32_t>();
  int32_t* start = mem;
  int32_t* pairs = mem + n_expert + 1;
  std::fill(start, start + n_expert + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    TT_CHECK(id[i] >= 0 && id[i] < n_expert, "MUL_MAT_ID: expert id {} of {}", id[i], n_expert);
    ++start[id[i] + 1];
  }
  for (int64_t e = 0; e < n_expert; ++e) start[e + 1] += start[e];
  int32_t* fill = pairs + n;  // running positions
  std::copy(start, start + n_expert, fill);
  for (int64_t i = 0; i < n; ++i) pairs[fill[id[i]]++] = static_cast<int32_t>(i);
  int32_t* active = fill;  // the running positions are done with
  int64_t n_active = 0;
  for (int64_t e = 0; e < n_expert; ++e)
    if (start[e + 1] > start[e]) active[n_active++] = static_cast<int32_t>(e);
  return {start, pairs, active, n_active};
}

// MUL_MAT_ID's thread scratch: group_by_expert's arrays, then one expert's tokens' activation rows side by side (at
// most one a token) and a tile's outputs for them.
struct ExpertScratch {
  size_t rows_offset, out_offset, bytes;
};
ExpertScratch expert_scratch(const Node& n) {
  const Tensor& x = *n.src[1];
  const Tensor& ids = *n.src[2];
  const uint64_t y_row = converted_row_bytes(n) > 0 ? converted_row_bytes(n) : x.row_size();
  const uint64_t tokens = static_cast<uint64_t>(ids.ne[1]);
  const size_t groups = static_cast<size_t>(2 * n.src[0]->ne[2] + 1 + ids.n_elements()) * sizeof(int32_t);
  const size_t rows_offset = (groups + 63) / 64 * 64;
  const size_t out_offset = rows_offset + (tokens * y_row + 63) / 64 * 64;
  return {rows_offset, out_offset, out_offset + tokens * kRowGroup * sizeof(float)};
}

// out[:, s, t] = W_e x[:, s % x_slots, t] with e = ids[s, t]. Activations are converted once (shared scratch);
// then units of (chosen expert, 16-row tile) go to threads, each tile meeting every token that chose the expert, so
// an expert's weights are read once per batch and experts no token chose not at all (nor do they take a unit from
// the shared counter: a token's 8 of 128 experts would otherwise pay 16 times the counter's traffic).
void mul_mat_id(const Node& n, const ComputeContext& ctx) {
  const Tensor& w = *n.src[0];
  const Tensor& x = *n.src[1];
  const Tensor& ids = *n.src[2];
  const QuantKernels* k = find_kernels(w.type);
  TT_CHECK(k != nullptr, "MUL_MAT_ID with {} weight '{}'", type_name(w.type), w.name);
  const int64_t K = w.ne[0], N = w.ne[1], n_expert = w.ne[2], slots = ids.ne[0], x_slots = x.ne[1];
  const uint8_t* y = x.data;
  uint64_t y_row = x.row_size();
  if (k->vec_dot_type != GgmlType::F32) {
    y_row = row_bytes(k->vec_dot_type, K);
    Range r = split(x.n_rows(), ctx.ith, ctx.nth);
    for (int64_t t = r.begin; t < r.end; ++t)
      quantize_activations(k->vec_dot_type, row_f32(x, t), ctx.scratch + t * y_row, K);
    ctx.barrier();
    y = ctx.scratch;
  }
  const ExpertGroups groups = group_by_expert(ids, n_expert, reinterpret_cast<int32_t*>(ctx.thread_scratch));
  const DotKernel& dot = w.rows_grouped ? k->row_groups->single : mul_mat_id_dot(*k, w, ctx.llamacpp_build);
  const uint64_t w_row = w.row_size(), slab = w.slab_stride();
  constexpr int64_t kRowTile = kRowGroup;
  const int64_t tiles = row_tiles(N);
  float* dst = n.out->as<float>();
  auto token_row = [&](int32_t pair) { return y + (pair / slots * x_slots + pair % slots % x_slots) * y_row; };
  // An expert's tokens' rows gathered side by side (once per expert and thread), so a unit is one tile call over all
  // of them; a lone token, or an expert chosen more than once by a token (more pairs than tokens), goes pair by pair.
  const ExpertScratch layout = expert_scratch(n);
  uint8_t* rows = ctx.thread_scratch + layout.rows_offset;
  float* tile_out = reinterpret_cast<float*>(ctx.thread_scratch + layout.out_offset);
  const int64_t n_tokens = ids.ne[1];
  int64_t gathered = -1;  // the expert whose rows `rows` holds
  // Units in shrinking chunks, as mul_mat's tiles: a unit of one token is a microsecond's work, and a claim from the
  // shared counter per unit cost as much in a small model's generation (the counter's line moving between cores).
  const int64_t units = groups.n_active * tiles;
  for_each_shrinking_chunk(ctx, units, [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t e = groups.active[unit / tiles], r0 = unit % tiles * kRowTile, r1 = std::min(N, r0 + kRowTile);
      const uint8_t* we = w.data + static_cast<uint64_t>(e) * slab + r0 * w_row;
      const int32_t* pairs = groups.pairs + groups.start[e];
      const int64_t m = groups.start[e + 1] - groups.start[e];
      if (m == 1 || m > n_tokens) {
        for (int64_t j = 0; j < m; ++j)
          dot.run_tile(K, r1 - r0, 1, we, w_row, token_row(pairs[j]), y_row, dst + pairs[j] * N + r0, N);
        continue;
      }
      if (gathered != e) {
        for (int64_t j = 0; j < m; ++j) std::memcpy(rows + j * y_row, token_row(pairs[j]), y_row);
        gathered = e;
      }
      dot.run_tile(K, r1 - r0, m, we, w_row, rows, y_row, tile_out, r1 - r0);
      for (int64_t j = 0; j < m; ++j)
        std::memcpy(dst + pairs[j] * N + r0, tile_out + j * (r1 - r0), (r1 - r0) * sizeof(float));
    }
  });
}

// Rotary embedding on x = [head_dim, n_heads, n_tokens], computed as ggml does (theta advanced by repeated
// multiplication, so the angles agree with llama.cpp's to the last bit).
void rope(const Node& n, const ComputeContext& ctx) {
  const Tensor& x = *n.src[0];
  const RopeParams& p = n.params.rope;
  const int64_t head_dim = x.ne[0], n_heads = x.ne[1], n_tokens = x.ne[2];
  const float theta_scale = std::pow(p.base, -2.0f / p.n_dims);
  float* cache = reinterpret_cast<float*>(ctx.thread_scratch);  // [n_dims] cos/sin pairs of one token
  Range r = split(n_tokens, ctx.ith, ctx.nth);
  for (int64_t t = r.begin; t < r.end; ++t) {
    float theta = static_cast<float>(n.params.pos0 + t);
    for (int i0 = 0; i0 < p.n_dims; i0 += 2) {
      const float ff = p.freq_factors ? p.freq_factors[i0 / 2] : 1.0f;
      const float angle = p.freq_scale * (theta / ff);
      cache[i0] = std::cos(angle);
      cache[i0 + 1] = std::sin(angle);
      theta *= theta_scale;
    }
    for (int64_t h = 0; h < n_heads; ++h) {
      const float* in = x.as<const float>() + (t * n_heads + h) * head_dim;
      float* out = n.out->as<float>() + (t * n_heads + h) * head_dim;
      if (in != out) std::memcpy(out, in, head_dim * sizeof(float));
      rope_rotate(in, out, cache, p.n_dims, p.neox);
    }
  }
}

// Rows of x (f32) into the cache at positions pos0.., converted to the cache type.
void set_rows(const Node& n, const ComputeContext& ctx) {
  const Tensor& x = *n.src[0];
  const Tensor& cache = *n.out;
  const int64_t width = cache.ne[0];
  const int64_t n_tokens = x.n_elements() / width;
  Range r = split(n_tokens, ctx.ith, ctx.nth);
  for (int64_t t = r.begin; t < r.end; ++t) {
    const float* src = x.as<const float>() + t * width;
    uint8_t* dst = cache.data + (n.params.pos0 + t) * cache.row_size();
    if (cache.type == GgmlType::F16)
      fp32_to_fp16_row(src, reinterpret_cast<uint16_t*>(dst), width);
    else
      std::memcpy(dst, src, width * sizeof(float));
  }
}

// The per-position steps of an F32 cache (an F16 cache, llama.cpp's default, goes to the SIMD attend_f16): the
// same order as the F16 steps, in floats.
float dot_f32_double(const float* k, const float* q, int64_t d) {
  double sum = 0.0;
  for (int64_t i = 0; i < d; ++i) sum += static_cast<double>(k[i] * q[i]);
  return static_cast<float>(sum);
}
void scale_f32(float* acc, float ms, int64_t d) {
  for (int64_t i = 0; i < d; ++i) acc[i] *= ms;
}
void mad_f32(float* acc, const float* v, float vs, int64_t d) {
  for (int64_t i = 0; i < d; ++i) acc[i] = std::fma(v[i], vs, acc[i]);
}

// Attention streamed over the cache with an online softmax (attend.h). src: q view [head_dim, n_tokens, n_heads]
// (storage [head_dim, n_heads, n_tokens]), K and V cache views. Queries that read the same KV head go to the
// kernel together (up to kAttendMaxQueries): the heads of a GQA group, and, when groups are small, neighbouring
// tokens of each head. Query (t, h) attends to positions [0, pos0 + t].
void flash_attn(const Node& n, const ComputeContext& ctx) {
  const Tensor& q = n.src[0]->storage();
  const Tensor& kc = n.src[1]->storage();
  const Tensor& vc = n.src[2]->storage();
  if (kc.type != vc.type)
    fail("flash attention: K cache {} and V cache {} differ", type_name(kc.type), type_name(vc.type));
  const int64_t head_dim = q.ne[0], n_heads = q.ne[1], n_tokens = q.ne[2];
  const int64_t n_kv_heads = kc.ne[0] / head_dim;
  const int64_t group = n_heads / n_kv_heads;
  const uint64_t stride = kc.row_size(), head_bytes = stride / n_kv_heads;  // K and V share type and width
  auto query = [&](int64_t t, int64_t h) { return q.as<const float>() + (t * n_heads + h) * head_dim; };
  auto output = [&](int64_t t, int64_t h) { return n.out->as<float>() + (t * n_heads + h) * head_dim; };
  // The step's first tiled_tokens tokens take llama.cpp's tiled path (attend.h; OpParams). A unit: the heads of a
  // GQA group (or up to kTileRows of them) and as many neighbouring tokens as fill kTileRows rows, so the heads
  // share each converted K and V tile. The last tokens' units (the longest rows of a causal prompt) go first, so
  // no thread is left with one long unit at the end.
  const int64_t tiled_tokens = n.params.tiled_tokens;
  const int64_t tile_heads = std::min(group, kTileRows), tile_head_chunks = (group + tile_heads - 1) / tile_heads;
  const int64_t tile_tokens = kTileRows / tile_heads, tile_blocks = (tiled_tokens + tile_tokens - 1) / tile_tokens;
  const int64_t tiled_units = tile_blocks * n_kv_heads * tile_head_chunks;
  auto tiled_unit = [&](int64_t unit) {
    const float* qs[kTileRows];
    float* outs[kTileRows];
    int64_t n_pos[kTileRows];
    const int64_t chunk = unit % tile_head_chunks, kv_head = unit / tile_head_chunks % n_kv_heads;
    const int64_t block = tile_blocks - 1 - unit / tile_head_chunks / n_kv_heads;
    const int64_t h0 = kv_head * group + chunk * tile_heads, h1 = std::min(h0 + tile_heads, (kv_head + 1) * group);
    const int64_t t0 = block * tile_tokens, t1 = std::min(t0 + tile_tokens, tiled_tokens);
    int rows = 0;
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t h = h0; h < h1; ++h, ++rows) {
        qs[rows] = query(t, h);
        outs[rows] = output(t, h);
        n_pos[rows] = n.params.pos0 + t + 1;
      }
    attend_tiled({rows, qs, n_pos, kc.data + kv_head * head_bytes, vc.data + kv_head * head_bytes, stride,
                  kc.type == GgmlType::F16, head_dim, n.params.scale, reinterpret_cast<float*>(ctx.thread_scratch),
                  outs});
  };
  // A one-token step over a long cache: llama.cpp splits the cache into chunks of kv_chunk positions (one per
  // thread of its run), attends each chunk on its own and merges the chunks' partial results in chunk order
  // (below). Otherwise one chunk holds every position.
  const int64_t kv_chunk = n.params.kv_chunk > 0 ? n.params.kv_chunk : n.params.pos0 + n_tokens;
  const int64_t kv_chunks = (n.params.pos0 + n_tokens + kv_chunk - 1) / kv_chunk;
  const bool split_cache = n.params.kv_chunk > 0;
  if (split_cache && (n_tokens != 1 || kv_chunks > n.params.kv_chunks_max))
    fail("flash attention: {} cache chunks (room for {}) with {} tokens in the step", kv_chunks, n.params.kv_chunks_max,
         n_tokens);
  // [n_heads][kv_chunks_max][2 + d]: each chunk's maximum, sum and accumulator
  float* partials = split_cache ? reinterpret_cast<float*>(ctx.scratch) : nullptr;
  const int64_t partial_floats = 2 + head_dim;
  auto partial = [&](int64_t h, int64_t c) { return partials + (h * n.params.kv_chunks_max + c) * partial_floats; };
  // Units: (cache chunk, token block, KV head, chunk of the group's heads), each at most kAttendMaxQueries queries
  // (one at a time for an F32 cache).
  const bool f16 = kc.type == GgmlType::F16;
  const int64_t max_queries = f16 ? kAttendMaxQueries : 1;
  const int64_t heads_per_unit = std::min<int64_t>(group, max_queries);
  const int64_t chunks = (group + heads_per_unit - 1) / heads_per_unit;
  const int64_t tokens_per_unit = std::max<int64_t>(1, max_queries / heads_per_unit);
  const int64_t token_blocks = (n_tokens - tiled_tokens + tokens_per_unit - 1) / tokens_per_unit;
  const int64_t n_units = kv_chunks * token_blocks * n_kv_heads * chunks;
  // The unit's queries in F16 [head_dim, kAttendMaxQueries], then the accumulator [head_dim] (thread_scratch_bytes);
  // an F32 cache's accumulator [head_dim] alone.
  uint16_t* q16 = reinterpret_cast<uint16_t*>(ctx.thread_scratch);
  uint16_t* acc16 = q16 + kAttendMaxQueries * head_dim;
  float* acc32 = reinterpret_cast<float*>(ctx.thread_scratch);
  const uint16_t* qs[kAttendMaxQueries];
  float* outs[kAttendMaxQueries];
  int64_t n_pos[kAttendMaxQueries];
  SoftmaxState states[kAttendMaxQueries];
  // Units are taken one at a time (neighbouring units cost about the same): each thread gets an equal share of a
  // causal prompt's work, where contiguous ranges would give the last thread the longest rows.
  for_each_chunk(ctx, tiled_units + n_units, [&](int64_t unit) {
    if (unit < tiled_units) return tiled_unit(unit);
    unit -= tiled_units;
    const int64_t chunk = unit % chunks, kv_head = unit / chunks % n_kv_heads,
                  block = unit / chunks / n_kv_heads % token_blocks, c = unit / chunks / n_kv_heads / token_blocks;
    const int64_t h0 = kv_head * group + chunk * heads_per_unit,
                  h1 = std::min(h0 + heads_per_unit, (kv_head + 1) * group);
    const int64_t t0 = tiled_tokens + block * tokens_per_unit, t1 = std::min(t0 + tokens_per_unit, n_tokens);
    const int64_t p0 = c * kv_chunk;  // the chunk's first position
    const uint8_t* k = kc.data + p0 * stride + kv_head * head_bytes;
    const uint8_t* v = vc.data + p0 * stride + kv_head * head_bytes;
    int nq = 0;
    for (int64_t t = t0; t < t1; ++t) {
      for (int64_t h = h0; h < h1; ++h, ++nq) {
        outs[nq] = split_cache ? partial(h, c) + 2 : output(t, h);
        n_pos[nq] = std::clamp<int64_t>(n.params.pos0 + t + 1 - p0, 0, kv_chunk);
        if (f16) {
          uint16_t* q_half = q16 + nq * head_dim;
          fp32_to_fp16_row(query(t, h), q_half, head_dim);  // llama.cpp converts Q to the cache type
          qs[nq] = q_half;
        }
      }
    }
    SoftmaxState* keep = split_cache ? states : nullptr;
    if (f16) {
      // Heads under 64 elements take none of ggml_vec_dot_f16's 64-element steps: the whole row is its tail, summed in
      // double in order, which is attend_f16's K.Q (and its kernels keep short heads in registers).
      const auto attend_f16_order =
          ctx.llamacpp_build == LlamaCppBuild::kAmdAvx512 && head_dim >= 64 ? attend_f16_simd64 : attend_f16;
      attend_f16_order(nq, qs, n_pos, k, v, stride, head_dim, n.params.scale, acc16, outs, keep);
    } else {
      std::fill(acc32, acc32 + head_dim, 0.0f);
      AttendSteps<float, dot_f32_double, scale_f32, mad_f32> steps{query(t0, h0), k, v, stride, head_dim, acc32};
      attend(steps, n_pos, n.params.scale, states);
      const float s = split_cache ? 1.0f : states[0].inverse();  // split: the state stays in `states`
      for (int64_t d = 0; d < head_dim; ++d) outs[0][d] = acc32[d] * s;
    }
    if (split_cache)
      for (int i = 0; i < nq; ++i) {
        const int64_t h = h0 + i % (h1 - h0);
        partial(h, c)[0] = states[i].max_score;
        partial(h, c)[1] = states[i].sum;
      }
  });
  if (!split_cache) return;
  ctx.barrier();
  // ggml_flash_attn_ext_reduce_partials: per head, the chunks in order, each rescaled to the running maximum
  // (contracted to FMAs as in llama.cpp's library code), then acc / S.
  const Range r = split(n_heads, ctx.ith, ctx.nth);
  for (int64_t h = r.begin; h < r.end; ++h) {
    float* out = output(0, h);
    float max_score = -INFINITY, sum = 0.0f;
    std::fill(out, out + head_dim, 0.0f);
    for (int64_t c = 0; c < kv_chunks; ++c) {
      const float* p = partial(h, c);
      if (p[1] == 0.0f) continue;  // no position of the chunk attended
      const float m = std::max(max_score, p[0]);
      const float scale_old = std::exp(max_score - m), scale_new = std::exp(p[0] - m);
      for (int64_t d = 0; d < head_dim; ++d) out[d] = std::fma(out[d], scale_old, p[2 + d] * scale_new);
      sum = std::fma(sum, scale_old, p[1] * scale_new);
      max_score = m;
    }
    const float inv = SoftmaxState{max_score, sum}.inverse();
    for (int64_t d = 0; d < head_dim; ++d) out[d] *= inv;
  }
}

// ggml_vec_swiglu_f32 (see swiglu_row in quant.h).
void swiglu(const Node& n, const ComputeContext& ctx) {
  const Tensor& a = *n.src[0];
  const Tensor& b = *n.src[1];
  const int64_t ne0 = a.ne[0];
  const int64_t b_rows = b.n_rows();
  Range r = split(a.n_rows(), ctx.ith, ctx.nth);
  for (int64_t i = r.begin; i < r.end; ++i) {
    const float* g = row_f32(a, i);
    const float* u = row_f32(b, i % b_rows);
    float* out = row_f32_mut(*n.out, i);
    swiglu_row(g, u, out, ne0);
  }
}

}  // namespace

void ComputeContext::barrier() const {
  if (threads && nth > 1) threads->wait();
}

int64_t ComputeContext::next_chunk() const { return chunk_counter->fetch_add(1, std::memory_order_relaxed); }

size_t scratch_bytes(const Node& node) {
  if (node.op == OpKind::FLASH_ATTN_EXT) {     // the cache chunks' partial results (every step of the graph: patched
    const Tensor& q = node.src[0]->storage();  // steps keep its scratch)
    return static_cast<size_t>(q.ne[1] * node.params.kv_chunks_max * (2 + q.ne[0])) * sizeof(float);
  }
  if (node.op != OpKind::MUL_MAT && node.op != OpKind::MUL_MAT_ID) return 0;
  return converted_row_bytes(node) * node.src[1]->n_rows();
}

size_t thread_scratch_bytes(const Node& node) {
  switch (node.op) {
    case OpKind::ROPE:
      return static_cast<size_t>(node.params.rope.n_dims) * sizeof(float);
    case OpKind::TOP_K:
      return static_cast<size_t>(node.src[0]->ne[0]) * sizeof(int32_t);
    case OpKind::MUL_MAT_ID:
      return expert_scratch(node).bytes;
    case OpKind::FLASH_ATTN_EXT: {
      const int64_t head_dim = node.src[0]->storage().ne[0];
      if (node.params.tiled_tokens > 0)
        return static_cast<size_t>(attend_tiled_scratch_floats(head_dim)) * sizeof(float);
      if (node.src[1]->storage().type != GgmlType::F16) return static_cast<size_t>(head_dim) * sizeof(float);
      return static_cast<size_t>((kAttendMaxQueries + 1) * head_dim) * sizeof(uint16_t);
    }
    default:
      return 0;
  }
}

bool shares_converted_input(const Node& previous, const Node& node) {
  if (previous.op != OpKind::MUL_MAT || node.op != OpKind::MUL_MAT || previous.src[1] != node.src[1]) return false;
  const QuantKernels* a = find_kernels(previous.src[0]->type);
  const QuantKernels* b = find_kernels(node.src[0]->type);
  return a && b && a->vec_dot_type == b->vec_dot_type && a->vec_dot_type != GgmlType::F32;
}

// One attention position's softmax step, in multiply-adds.
constexpr uint64_t kAttendPositionWork = 64;

uint64_t node_work(const Node& n) {
  uint64_t work = n.write.length;
  for (const ByteRange& r : n.reads) work += r.length;
  if (n.op == OpKind::MUL_MAT) {
    const Tensor& w = *n.src[0];
    work += static_cast<uint64_t>(w.ne[0]) * static_cast<uint64_t>(w.ne[1]) * static_cast<uint64_t>(n.src[1]->n_rows());
  } else if (n.op == OpKind::MUL_MAT_ID) {  // the chosen experts' bytes are not known before the step runs
    const Tensor& w = *n.src[0];
    const uint64_t pairs = static_cast<uint64_t>(n.src[2]->n_elements());
    work += static_cast<uint64_t>(w.ne[0]) * static_cast<uint64_t>(w.ne[1]) * pairs +
            w.row_size() * static_cast<uint64_t>(w.ne[1]) * std::min<uint64_t>(pairs, w.ne[2]);
  } else if (n.op == OpKind::FLASH_ATTN_EXT) {
    // Each (query, position) also pays the online softmax's exp and rescale, whatever the head's length
    // (kAttendPositionWork).
    const Tensor& q = n.src[0]->storage();  // [head_dim, n_heads, n_tokens]
    work += (2 * static_cast<uint64_t>(q.ne[0]) + kAttendPositionWork) * static_cast<uint64_t>(q.ne[1]) *
            static_cast<uint64_t>(q.ne[2]) * static_cast<uint64_t>(n.params.n_kv);
  }
  return work;
}

void compute_node(const Node& n, const ComputeContext& ctx) {
  switch (n.op) {
    case OpKind::GET_ROWS:
      return n.params.rows.empty() ? get_rows_per_token(n, ctx) : get_rows(n, ctx);
    case OpKind::RMS_NORM:
      return rms_norm(n, ctx);
    case OpKind::MUL:
      return binary(n, ctx, [](float a, float b) { return a * b; });
    case OpKind::ADD:
      if (n.src.size() == 1) return add_slots(n, ctx);
      return binary(n, ctx, [](float a, float b) { return a + b; });
    case OpKind::MUL_MAT:
      return mul_mat(n, ctx);
    case OpKind::ROPE:
      return rope(n, ctx);
    case OpKind::SET_ROWS:
      return set_rows(n, ctx);
    case OpKind::FLASH_ATTN_EXT:
      return flash_attn(n, ctx);
    case OpKind::SWIGLU:
      return swiglu(n, ctx);
    case OpKind::SOFT_MAX:
      return soft_max(n, ctx);
    case OpKind::SIGMOID:
      return unary(n, ctx, [](float v) { return 1.0f / (1.0f + std::exp(-v)); });
    case OpKind::TOP_K:
      return top_k(n, ctx);
    case OpKind::SUM_ROWS:
      return sum_rows(n, ctx);
    case OpKind::CLAMP:
      return unary(n, ctx, [lo = n.params.lo, hi = n.params.hi](float v) { return std::min(std::max(v, lo), hi); });
    case OpKind::DIV:
      return binary(n, ctx, [](float a, float b) { return a / b; });
    case OpKind::SCALE:
      return unary(n, ctx, [s = n.params.scale](float v) { return v * s; });
    case OpKind::MUL_MAT_ID:
      return mul_mat_id(n, ctx);
    case OpKind::RESHAPE:
    case OpKind::VIEW:
    case OpKind::PERMUTE:
      return;
    case OpKind::kCount:
      break;
  }
  fail("no kernel for op {}", op_name(n.op));
}

}  // namespace tt
