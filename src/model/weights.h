// The model's weights: non-owning views into the memory-mapped GGUF file, bound by name with shape checks.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "graph/tensor.h"
#include "model/config.h"

namespace tt {

struct LayerWeights {
  const Tensor* attn_norm = nullptr;  // [n_embd]
  const Tensor* wq = nullptr;         // [n_embd, n_embd_q]
  const Tensor* wk = nullptr;         // [n_embd, n_embd_kv]
  const Tensor* wv = nullptr;         // [n_embd, n_embd_kv]
  const Tensor* wo = nullptr;         // [n_embd_q, n_embd]
  const Tensor* q_norm = nullptr;     // [head_dim] (qwen3) or [n_embd_q] (olmoe); optional
  const Tensor* k_norm = nullptr;     // [head_dim] (qwen3) or [n_embd_kv] (olmoe); optional
  const Tensor* bq = nullptr;         // [n_embd]     optional (qwen2 has it)
  const Tensor* bk = nullptr;         // [n_embd_kv]  optional
  const Tensor* bv = nullptr;         // [n_embd_kv]  optional
  const Tensor* ffn_norm = nullptr;   // [n_embd]
  const Tensor* ffn_gate = nullptr;   // [n_embd, n_ff]
  const Tensor* ffn_up = nullptr;     // [n_embd, n_ff]
  const Tensor* ffn_down = nullptr;   // [n_ff, n_embd]
  // Experts (when the model has them; the dense ffn_gate/up/down are then absent).
  const Tensor* ffn_gate_inp = nullptr;        // router [n_embd, n_expert]
  const Tensor* ffn_gate_exps = nullptr;       // [n_embd, n_ff_exp, n_expert]
  const Tensor* ffn_up_exps = nullptr;         // [n_embd, n_ff_exp, n_expert]
  const Tensor* ffn_down_exps = nullptr;       // [n_ff_exp, n_embd, n_expert]
  const Tensor* ffn_gate_inp_shexp = nullptr;  // shared expert's gate [n_embd] (qwen2moe)
  const Tensor* ffn_gate_shexp = nullptr;      // [n_embd, n_ff_shexp]
  const Tensor* ffn_up_shexp = nullptr;        // [n_embd, n_ff_shexp]
  const Tensor* ffn_down_shexp = nullptr;      // [n_ff_shexp, n_embd]
};

struct ModelWeights {
  const Tensor* token_embd = nullptr;   // [n_embd, n_vocab]
  const Tensor* output_norm = nullptr;  // [n_embd]
  const Tensor* output = nullptr;       // [n_embd, n_vocab]; the embedding itself when tied
  bool output_tied = false;             // output.weight absent: logits use token_embd
  const Tensor* rope_freqs = nullptr;   // [n_rot / 2] optional frequency factors
  std::vector<LayerWeights> layers;
  std::deque<Tensor> views;        // storage of the Tensor views above
  std::vector<std::string> notes;  // what binding found (tied output, optional tensors), for run.json
};

// Binds every tensor the architecture needs; errors name the tensor ("blk.3.attn_k.weight: expected [2048, 256],
// got [256, 2048]"), missing tensors, types without kernels, and tensors the architecture does not use.
ModelWeights bind_weights(const GgufFile& file, ModelConfig& config);

// Where the file's bytes are a private copy (GgufFile::rewritable), stores the rows of each matrix whose type has
// row-group kernels (QuantKernels::row_groups) in those groups, a permutation within each 16 rows, and marks the
// tensor (Tensor::rows_grouped). The byte ranges the trace records (whole tensors and expert slabs) hold the same
// bytes. Only matrices that MUL_MAT / MUL_MAT_ID read: the token embedding's rows are read one by one. Returns how
// many tensors were regrouped.
int group_weight_rows(GgufFile& file, ModelWeights& weights);

}  // namespace tt
