// The forward pass of llama-family models as a graph per step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/aligned_buffer.h"
#include "graph/graph.h"
#include "model/model.h"

namespace tt {

// Buffer ids in every step graph.
enum : int { kInputBuffer = 0, kArenaBuffer = 1, kScratchBuffer = 2, kFirstKvBuffer = 3 };
inline int k_buffer_id(int layer) { return kFirstKvBuffer + 2 * layer; }
inline int v_buffer_id(int layer) { return kFirstKvBuffer + 2 * layer + 1; }

// What persists across steps: the KV cache, and the buffers steps reuse.
struct RunState {
  int32_t n_ctx = 0;
  GgmlType kv_type = GgmlType::F16;
  std::vector<std::unique_ptr<AlignedBuffer>> k_cache, v_cache;    // per layer: [n_embd_kv, n_ctx] of kv_type
  AlignedBuffer inputs;                                            // token ids, then positions (int32)
  AlignedBuffer arena;                                             // activations
  AlignedBuffer scratch;                                           // per-op work memory
  int32_t n_past = 0;                                              // positions already in the cache
  LlamaCppBuild llamacpp_build = LlamaCppBuild::kIntelAvx512Fp16;  // given to every step's graph
  int n_threads = 1;  // the threads of the llama.cpp run reproduced: its one-token attention splits the cache by them
  // `run --moe-predict`: each routed layer but the last also applies the next layer's router to its FFN input
  // (ffn_moe_pred_* nodes), the next layer's experts as Mixtral-offloading would speculate them.
  bool moe_predict = false;
};

void init_run_state(RunState& s, const ModelConfig& c, int32_t n_ctx, GgmlType kv_type);

// The routing of one mixture-of-experts layer in a step, read-only views of its nodes' outputs (kept intact until
// the next step runs). Rows are the tokens of the layer's feed-forward: every token of the step, except in the last
// layer of a prompt, where only the last token goes on (as in llama.cpp).
struct LayerRouting {
  int layer = -1;
  const Tensor* probs = nullptr;    // ffn_moe_probs-N [n_expert, n_tokens]: router probabilities
  const Tensor* experts = nullptr;  // ffn_moe_topk-N [n_used, n_tokens] I32: chosen experts, llama.cpp's order
  const Tensor* weights = nullptr;  // [1, n_used, n_tokens]: the final weights (after renormalising, scaling)
  // With RunState::moe_predict: this layer's experts as the previous routed layer predicted them, its
  // ffn_moe_pred_topk-(N-1) [n_used, n_prev_tokens] I32 (this layer's rows are its last n_tokens() rows); else null.
  const Tensor* predicted = nullptr;

  int64_t n_tokens() const { return experts->ne[1]; }
  int64_t n_used() const { return experts->ne[0]; }
  int32_t expert(int64_t t, int64_t slot) const { return experts->as<const int32_t>()[t * n_used() + slot]; }
  float weight(int64_t t, int64_t slot) const { return weights->as<const float>()[t * n_used() + slot]; }
  // Row t's predicted expert in `slot` (needs `predicted`).
  int32_t predicted_expert(int64_t t, int64_t slot) const {
    return predicted->as<const int32_t>()[(predicted->ne[1] - n_tokens() + t) * predicted->ne[0] + slot];
  }
  // The lowest chosen probability minus the best unchosen one (small: a near-tie); 0 when every expert is chosen.
  float margin(int64_t t) const;
};

struct StepGraph {
  Graph graph;
  const Tensor* logits = nullptr;  // [n_vocab] of the last token
  const Tensor* hidden = nullptr;  // result_norm: final normalised hidden state of the last token
  // What differs between steps of the same token count (update_step_graph): the token ids looked up, the
  // positions, and the views of the cache that attention reads, whose dimension `dim` is the attended length.
  const Tensor* inp_tokens = nullptr;  // [n_tokens]
  struct AttendedView {
    Tensor* view;
    int dim;
  };
  std::vector<AttendedView> attended_views;
  // The nodes whose byte ranges a patch changes (resolve_ranges of these only after update_step_graph): the token
  // rows' lookups, the cache writes and every reader of an attended view.
  std::vector<uint32_t> patched_ranges;
  std::vector<LayerRouting> routing;  // per MoE layer, in layer order (empty for dense models)
};

// Builds the graph that evaluates `tokens` at positions [s.n_past, s.n_past + n), writes the input buffer and
// describes the runtime buffers. Does not allocate activations (the allocator does).
void build_step_graph(StepGraph& out, const Model& m, RunState& s, std::span<const int32_t> tokens);

// Turns `step` (built for the same model and run state) into the graph build_step_graph would build for `tokens`
// at s.n_past, when only token ids and positions differ: the same token count. Shapes of activations stay, so
// their allocation plan does too; byte ranges must be resolved again. Returns false (graph untouched) when the
// token count differs. Generation steps are this case: rebuilding was a third of a small model's step.
bool update_step_graph(StepGraph& step, const Model& m, RunState& s, std::span<const int32_t> tokens);

}  // namespace tt
