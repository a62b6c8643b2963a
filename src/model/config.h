// Hyperparameters of a llama-family model, read from GGUF metadata and validated at load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace tt {

enum class Architecture { LLAMA, QWEN2, QWEN2MOE, OLMOE, QWEN3, QWEN3MOE };

// How router logits become expert probabilities (llama.cpp's llama_expert_gating_func_type).
enum class ExpertGating { SOFTMAX, SIGMOID };

struct ModelConfig {
  Architecture arch = Architecture::LLAMA;
  std::string arch_name;          // as in general.architecture
  std::string name;               // general.name
  int32_t n_vocab = 0;            // rows of token_embd
  int32_t n_ctx_train = 0;        // {arch}.context_length
  int32_t n_embd = 0;             // {arch}.embedding_length
  int32_t n_layer = 0;            // {arch}.block_count
  int32_t n_ff = 0;               // {arch}.feed_forward_length
  int32_t n_head = 0;             // {arch}.attention.head_count
  int32_t n_head_kv = 0;          // {arch}.attention.head_count_kv (default n_head)
  int32_t head_dim = 0;           // n_embd / n_head (or {arch}.attention.key_length)
  int32_t n_rot = 0;              // {arch}.rope.dimension_count (default head_dim)
  float rope_base = 10000.0f;     // {arch}.rope.freq_base
  float rope_freq_scale = 1.0f;   // 1 / {arch}.rope.scaling.factor for linear scaling
  bool rope_neox = false;         // qwen2: NeoX-mode rotation
  float rms_eps = 1e-5f;          // {arch}.attention.layer_norm_rms_epsilon
  bool qk_norm_per_head = false;  // qwen3, qwen3moe: RMS norms on Q and K per head (attn_{q,k}_norm of head_dim)
  bool qk_norm_whole = false;     // olmoe: RMS norms on the whole Q and K projections

  // Mixture of experts (n_expert == 0: a dense feed-forward).
  int32_t n_expert = 0;       // {arch}.expert_count
  int32_t n_expert_used = 0;  // {arch}.expert_used_count: experts per token (top-k)
  int32_t n_ff_exp = 0;       // {arch}.expert_feed_forward_length (default feed_forward_length)
  int32_t n_ff_shexp = 0;     // {arch}.expert_shared_feed_forward_length: the shared expert (qwen2moe), else 0
  ExpertGating gating = ExpertGating::SOFTMAX;  // {arch}.expert_gating_func (1 softmax, 2 sigmoid)
  bool expert_weights_norm = false;             // renormalise the chosen weights to sum 1 ({arch}.expert_weights_norm)
  float expert_weights_scale = 0.0f;  // multiply the weights by this ({arch}.expert_weights_scale; 0: not scaled)

  int32_t n_embd_kv() const { return n_head_kv * head_dim; }
  int32_t n_embd_q() const { return n_head * head_dim; }  // width of Q and of the attention output
  // Notes of defaults used and checks passed, reported in run.json.
  std::vector<std::string> notes;
};

// Reads and validates; throws tt::Error naming the key and the problem. Unknown architectures are rejected.
ModelConfig read_model_config(const GgufFile& file);

}  // namespace tt
