// The vocabulary the engine and its trace share: op kinds, the memory pools bytes live in, and step phases. The
// trace format (src/trace) records these values, so it depends on this header and not on the engine.
#pragma once

#include <cstdint>

namespace tt {

// The fixed, documented list of op kinds (docs/trace-format.md). Names follow ggml's.
enum class OpKind : uint8_t {
  GET_ROWS,        // rows of a table (embedding lookup, selecting the last token; per token, the rows an op chose)
  RMS_NORM,        // x / sqrt(mean(x^2) + eps)
  MUL,             // elementwise, second operand broadcast over rows (norm weights) or, one value a row, along it
  ADD,             // elementwise, second operand broadcast over rows (residuals, biases)
  MUL_MAT,         // out[t][r] = dot(W row r, x row t)
  ROPE,            // rotary position embedding
  SET_ROWS,        // write rows into the KV cache (converting to the cache type)
  FLASH_ATTN_EXT,  // softmax(Q K^T * scale + causal mask) V over the KV cache, streamed
  SWIGLU,          // silu(gate) * up
  RESHAPE,         // views: no computation, recorded so the op sequence matches llama.cpp's
  VIEW,
  PERMUTE,
  // Mixture of experts (llama.cpp's build_moe_ffn).
  SOFT_MAX,    // per row: exp(x - max) / sum (router probabilities)
  SIGMOID,     // 1 / (1 + exp(-x)) (sigmoid gating, the shared expert's gate)
  TOP_K,       // per row: indices of the k largest values, largest first (ggml_argsort_top_k), I32 output
  SUM_ROWS,    // per row: the sum of its values
  CLAMP,       // min(max(x, lo), hi)
  DIV,         // elementwise a / b, b broadcast as for MUL
  SCALE,       // x * s
  MUL_MAT_ID,  // per token and slot: dot products with the weight slab of the expert the ids name
  kCount,
};
const char* op_name(OpKind op);
bool op_is_view(OpKind op);

enum class Pool : uint8_t {
  MODEL_FILE,  // weights, read in place from the mmap
  KV_CACHE,    // per-layer K and V buffers
  ACTIVATION,  // intermediate results, placed in the activation arena by the allocator
  INPUT,       // token ids, positions: written by the host before the step
  SCRATCH,     // per-op work memory (e.g. activations quantized to Q8 for a matrix product)
};
const char* pool_name(Pool pool);

enum class Phase : uint8_t { PROMPT = 0, GENERATE = 1 };
const char* phase_name(Phase p);

}  // namespace tt
