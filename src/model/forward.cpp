#include "model/forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "graph/builder.h"
#include "quant/attend.h"

namespace tt {

void init_run_state(RunState& s, const ModelConfig& c, int32_t n_ctx, GgmlType kv_type) {
  if (kv_type != GgmlType::F16 && kv_type != GgmlType::F32)
    fail("KV cache type {} is not supported (F16 or F32)", type_name(kv_type));
  s.n_ctx = n_ctx;
  s.kv_type = kv_type;
  s.k_cache.clear();
  s.v_cache.clear();
  const uint64_t layer_bytes = row_bytes(kv_type, c.n_embd_kv()) * n_ctx;
  for (int il = 0; il < c.n_layer; ++il) {
    s.k_cache.push_back(std::make_unique<AlignedBuffer>(layer_bytes));
    s.v_cache.push_back(std::make_unique<AlignedBuffer>(layer_bytes));
  }
  s.n_past = 0;
}

namespace {

// Checks a step of `tokens` at s.n_past against the context and the vocabulary, and writes the input buffer:
// token ids, positions, then the row whose logits are output. Returns the number of attended cache positions.
int32_t prepare_inputs(const ModelConfig& c, RunState& s, std::span<const int32_t> tokens) {
  const int64_t n_tokens = static_cast<int64_t>(tokens.size());
  const int32_t pos0 = s.n_past;
  const int32_t n_kv = pos0 + static_cast<int32_t>(n_tokens);  // cache positions attended after this step
  if (n_tokens == 0) fail("a step needs at least one token");
  if (n_kv > s.n_ctx)
    fail("context overflow: {} tokens at position {} need {} positions but the context holds {} (raise -c)", n_tokens,
         pos0, n_kv, s.n_ctx);
  for (int32_t t : tokens)
    if (t < 0 || t >= c.n_vocab) fail("token id {} is outside the vocabulary (0..{})", t, c.n_vocab - 1);
  s.inputs.reserve((2 * n_tokens + 1) * sizeof(int32_t));
  auto* ids = reinterpret_cast<int32_t*>(s.inputs.data());
  for (int64_t t = 0; t < n_tokens; ++t) ids[t] = tokens[t], ids[n_tokens + t] = pos0 + static_cast<int32_t>(t);
  ids[2 * n_tokens] = static_cast<int32_t>(n_tokens - 1);
  return n_kv;
}

// llama.cpp's one-token steps split a cache view of 512 positions or more into one chunk per thread of its run
// (ggml_compute_forward_flash_attn_ext_f16); the view covers the used positions rounded up to 256, at most the
// context (llama_kv_cache::get_n_kv). The chunk size is 0 where there is no split; the chunk count is at most the
// threads, for every step of a one-token graph whose context can reach 512 (one thread's split gives the unsplit
// result, so one thread never splits).
GraphBuilder::KvSplit llamacpp_kv_split(const RunState& s, int64_t n_tokens, int32_t n_kv) {
  const auto pad = [](int32_t n) { return (n + 255) / 256 * 256; };
  if (n_tokens != 1 || s.n_threads <= 1 || pad(s.n_ctx) < 512) return {};
  const int32_t view = std::min(pad(s.n_ctx), std::max(256, pad(n_kv)));
  return {view < 512 ? 0 : (view + s.n_threads - 1) / s.n_threads, s.n_threads};
}

// llama.cpp evaluates a batch in micro-batches of kLlamaCppUbatch tokens (its default n_ubatch), and a micro-batch
// of kTileRows tokens or more takes the tiled attention (attend.h). Returns how many of the step's first tokens do.
constexpr int64_t kLlamaCppUbatch = 512;
int32_t llamacpp_tiled_tokens(int64_t n_tokens, int64_t head_dim) {
  if (!attention_is_tiled(kTileRows, head_dim)) return 0;
  const int64_t whole = n_tokens / kLlamaCppUbatch * kLlamaCppUbatch;
  return static_cast<int32_t>(attention_is_tiled(n_tokens - whole, head_dim) ? n_tokens : whole);
}

// Q or K after its projection, as [head_dim, heads, n_tokens], RMS-normed where the model says: olmoe over the whole
// projection before splitting it into heads, qwen3 per head.
Tensor* qk_norm(GraphBuilder& b, const ModelConfig& c, Tensor* x, const Tensor* norm, int64_t heads, int64_t n_tokens,
                const std::string& name) {
  if (norm && c.qk_norm_whole) x = b.mul(b.rms_norm(x, c.rms_eps, b.name("norm")), norm, b.name(name + "_normed"));
  x = b.reshape(x, {c.head_dim, heads, n_tokens}, b.name(name));
  if (norm && c.qk_norm_per_head) x = b.mul(b.rms_norm(x, c.rms_eps, b.name("norm")), norm, b.name(name + "_normed"));
  return x;
}

// llama.cpp's build_moe_ffn on the normed input cur [n_embd, n_tokens]: router logits, probabilities, the top-k
// experts by probability, their probabilities as weights (renormalised, scaled where the model says), each chosen
// expert's SwiGLU FFN, the outputs weighted and summed in slot order; plus the sigmoid-gated shared expert.
// `predicted`: on entry the previous layer's prediction of this layer's experts (or null), recorded in the routing;
// on exit this layer's prediction of the next layer's (null unless `next` is given): the next layer's router and
// gating on this layer's normed input, its top-k. Computed before the experts so a runtime could prefetch on it.
Tensor* moe_ffn(GraphBuilder& b, const ModelConfig& c, const LayerWeights& l, const LayerWeights* next, Tensor* cur,
                StepGraph& out, const Tensor*& predicted) {
  const int64_t n_tokens = cur->ne[1], k = c.n_expert_used;
  auto route = [&](const Tensor* router, const std::string& prefix) {
    Tensor* logits = b.mul_mat(router, cur, b.name(prefix + "_logits"));
    Tensor* probs = c.gating == ExpertGating::SOFTMAX ? b.soft_max(logits, b.name(prefix + "_probs"))
                                                      : b.sigmoid(logits, b.name(prefix + "_probs"));
    return std::pair{probs, b.top_k(probs, static_cast<int32_t>(k), b.name(prefix + "_topk"))};
  };
  auto [probs, topk] = route(l.ffn_gate_inp, "ffn_moe");
  Tensor* weights = b.get_rows_per_token(probs, topk, b.name("ffn_moe_weights"));  // [1, k, n_tokens]
  if (c.expert_weights_norm) {
    Tensor* w2 = b.reshape(weights, {k, n_tokens}, b.name("ffn_moe_weights"));
    Tensor* sum = b.sum_rows(w2, b.name("ffn_moe_weights_sum"));
    // llama.cpp's floor: the smallest normal F16, against a division by zero.
    sum = b.clamp(sum, 6.103515625e-5f, INFINITY, b.name("ffn_moe_weights_sum_clamped"));
    weights =
        b.reshape(b.div(w2, sum, b.name("ffn_moe_weights_norm")), {1, k, n_tokens}, b.name("ffn_moe_weights_norm"));
  }
  if (c.expert_weights_scale != 0.0f)
    weights = b.scale(weights, c.expert_weights_scale, b.name("ffn_moe_weights_scaled"));
  out.routing.push_back({b.layer(), probs, topk, weights, predicted});
  predicted = next ? route(next->ffn_gate_inp, "ffn_moe_pred").second : nullptr;

  Tensor* x = b.reshape(cur, {c.n_embd, 1, n_tokens}, b.name("ffn_norm"));
  Tensor* up = b.mul_mat_id(l.ffn_up_exps, x, topk, b.name("ffn_moe_up"));
  Tensor* gate = b.mul_mat_id(l.ffn_gate_exps, x, topk, b.name("ffn_moe_gate"));
  Tensor* act = b.swiglu(gate, up, b.name("ffn_moe_swiglu"));
  Tensor* experts = b.mul_mat_id(l.ffn_down_exps, act, topk, b.name("ffn_moe_down"));  // [n_embd, k, n_tokens]
  experts = b.mul(experts, weights, b.name("ffn_moe_weighted"));
  Tensor* moe_out = b.add_slots(experts, b.name("ffn_moe_out"));
  if (!l.ffn_gate_inp_shexp) return moe_out;

  Tensor* shexp_gate = b.sigmoid(b.mul_mat(l.ffn_gate_inp_shexp, cur, b.name("ffn_shexp_gate_inp")),
                                 b.name("ffn_shexp_gate"));  // [1, n_tokens]
  Tensor* s_up = b.mul_mat(l.ffn_up_shexp, cur, b.name("ffn_up"));
  Tensor* s_gate = b.mul_mat(l.ffn_gate_shexp, cur, b.name("ffn_gate"));
  Tensor* shexp = b.mul_mat(l.ffn_down_shexp, b.swiglu(s_gate, s_up, b.name("ffn_swiglu")), b.name("ffn_shexp"));
  Tensor* shexp_out = b.mul(shexp, shexp_gate, b.name("ffn_shexp_out"));
  return b.add(moe_out, shexp_out, b.name("ffn_out"));
}

}  // namespace

void build_step_graph(StepGraph& out, const Model& m, RunState& s, std::span<const int32_t> tokens) {
  const ModelConfig& c = m.config;
  const ModelWeights& w = m.weights;
  const int64_t n_tokens = static_cast<int64_t>(tokens.size());
  const int32_t pos0 = s.n_past;
  const int32_t n_kv = prepare_inputs(c, s, tokens);

  Graph& g = out.graph;
  g.llamacpp_build = s.llamacpp_build;
  g.buffers.push_back({kInputBuffer, Pool::INPUT, "inputs", s.inputs.data(), s.inputs.size()});
  g.buffers.push_back({kArenaBuffer, Pool::ACTIVATION, "activations", nullptr, 0});
  g.buffers.push_back({kScratchBuffer, Pool::SCRATCH, "scratch", nullptr, 0});
  std::vector<Tensor*> k_cache, v_cache;
  for (int il = 0; il < c.n_layer; ++il) {
    for (int kv = 0; kv < 2; ++kv) {
      AlignedBuffer& buf = kv == 0 ? *s.k_cache[il] : *s.v_cache[il];
      int id = kv == 0 ? k_buffer_id(il) : v_buffer_id(il);
      std::string name = fmt::format("cache_{}_l{}", kv == 0 ? "k" : "v", il);
      g.buffers.push_back({id, Pool::KV_CACHE, name, buf.data(), buf.size()});
      Tensor* t = g.new_tensor(name, s.kv_type, {c.n_embd_kv(), s.n_ctx}, il, Pool::KV_CACHE);
      t->buffer_id = id;
      t->data = buf.data();
      (kv == 0 ? k_cache : v_cache).push_back(t);
    }
  }

  GraphBuilder b(g);
  const int64_t H = c.n_head, HKV = c.n_head_kv, D = c.head_dim;
  const Tensor* inp_tokens = b.input("inp_tokens", GgmlType::I32, {n_tokens}, kInputBuffer, s.inputs.data(), 0);
  out.inp_tokens = inp_tokens;
  const Tensor* inp_pos =
      b.input("inp_pos", GgmlType::I32, {n_tokens}, kInputBuffer, s.inputs.data(), n_tokens * sizeof(int32_t));
  const RopeParams rope{c.n_rot, c.rope_neox, c.rope_base, c.rope_freq_scale,
                        w.rope_freqs ? w.rope_freqs->as<const float>() : nullptr};
  const float kq_scale = 1.0f / std::sqrt(static_cast<float>(D));

  // Token embeddings: the rows of the prompt's tokens only.
  Tensor* x = b.get_rows(w.token_embd, inp_tokens, {tokens.begin(), tokens.end()}, "embd");
  const Tensor* predicted = nullptr;  // the previous routed layer's prediction of the next one's experts

  for (int il = 0; il < c.n_layer; ++il) {
    const LayerWeights& l = w.layers[il];
    b.set_layer(il);
    const Tensor* inp_sa = x;  // residual stream entering the block

    // Attention: pre-norm, projections (+ biases where the model has them), rotary positions.
    Tensor* cur = b.mul(b.rms_norm(x, c.rms_eps, b.name("norm")), l.attn_norm, b.name("attn_norm"));
    Tensor* q = b.mul_mat(l.wq, cur, b.name("Qcur"));
    if (l.bq) q = b.add(q, l.bq, b.name("Qcur"));
    q = qk_norm(b, c, q, l.q_norm, H, n_tokens, "Qcur");
    q = b.rope(q, inp_pos, rope, pos0, b.name("Qcur"));
    Tensor* v = b.mul_mat(l.wv, cur, b.name("Vcur"));
    if (l.bv) v = b.add(v, l.bv, b.name("Vcur"));
    v = b.reshape(v, {D, HKV, n_tokens}, b.name("Vcur"));
    Tensor* k = b.mul_mat(l.wk, cur, b.name("Kcur"));
    if (l.bk) k = b.add(k, l.bk, b.name("Kcur"));
    k = qk_norm(b, c, k, l.k_norm, HKV, n_tokens, "Kcur");
    k = b.rope(k, inp_pos, rope, pos0, b.name("Kcur"));

    // Store this step's K and V in the cache (converted to the cache type).
    const std::string kc = k_cache[il]->name, vc = v_cache[il]->name;
    b.set_rows(k_cache[il], b.view(k, {D * HKV, n_tokens}, b.name("Kcur") + " (view)"), pos0, kc + " (view)");
    b.set_rows(v_cache[il], b.view(v, {D * HKV, n_tokens}, b.name("Vcur") + " (view)"), pos0, vc + " (view)");

    // softmax(Q K^T / sqrt(d) + causal mask) V over every cached position, per head (KV heads shared by groups).
    const Tensor* qp = b.permute(b.view(q, {D, H, n_tokens}, b.name("Qcur") + " (view)"), {D, n_tokens, H},
                                 b.name("Qcur") + " (view) (permuted)");
    Tensor* kv = b.view(k_cache[il], {D, HKV, n_kv}, kc + " (view)");
    Tensor* kp = b.permute(kv, {D, n_kv, HKV}, kc + " (view) (permuted)");
    Tensor* vv = b.view(v_cache[il], {D, HKV, n_kv}, vc + " (view)");
    Tensor* vp = b.permute(vv, {D, n_kv, HKV}, vc + " (view) (permuted)");
    out.attended_views.insert(out.attended_views.end(), {{kv, 2}, {kp, 1}, {vv, 2}, {vp, 1}});
    Tensor* attn = b.flash_attn(qp, kp, vp, pos0, n_kv, kq_scale, llamacpp_kv_split(s, n_tokens, n_kv),
                                llamacpp_tiled_tokens(n_tokens, c.head_dim), b.name("fattn"));
    cur = b.mul_mat(l.wo, b.reshape(attn, {c.n_embd_q(), n_tokens}, b.name("kqv_out")), b.name("attn_out"));

    // Last layer: only the last token's logits are needed, so only its row continues.
    if (il == c.n_layer - 1 && n_tokens > 1) {
      const int32_t last = static_cast<int32_t>(n_tokens - 1);
      const Tensor* out_ids =
          b.input("inp_out_ids", GgmlType::I32, {1}, kInputBuffer, s.inputs.data(), 2 * n_tokens * sizeof(int32_t));
      cur = b.get_rows(cur, out_ids, {last}, b.name("attn_out_last"));
      inp_sa = b.get_rows(inp_sa, out_ids, {last}, b.name("inp_last"));
    }
    Tensor* ffn_inp = b.add(cur, inp_sa, b.name("ffn_inp"));

    // Feed-forward: pre-norm, SwiGLU (of the experts the router chooses), down projection, residual.
    cur = b.mul(b.rms_norm(ffn_inp, c.rms_eps, b.name("norm")), l.ffn_norm, b.name("ffn_norm"));
    if (c.n_expert == 0) {
      Tensor* gate = b.mul_mat(l.ffn_gate, cur, b.name("ffn_gate"));
      Tensor* up = b.mul_mat(l.ffn_up, cur, b.name("ffn_up"));
      cur = b.mul_mat(l.ffn_down, b.swiglu(gate, up, b.name("ffn_swiglu")), b.name("ffn_out"));
    } else {
      const bool predict_next = s.moe_predict && il + 1 < c.n_layer && w.layers[il + 1].ffn_gate_inp;
      cur = moe_ffn(b, c, l, predict_next ? &w.layers[il + 1] : nullptr, cur, out, predicted);
    }
    x = b.add(cur, ffn_inp, b.name("l_out"));
  }
  b.set_layer(-1);

  // Final norm and the output projection (the embedding matrix when tied).
  Tensor* hidden = b.mul(b.rms_norm(x, c.rms_eps, "norm"), w.output_norm, "result_norm");
  out.hidden = hidden;
  out.logits = b.mul_mat(w.output, hidden, "result_output");

  // What update_step_graph changes of each node's byte ranges: the rows looked up (GET_ROWS of the tokens), the
  // position written (SET_ROWS) and the attended length of whatever reads an attended view.
  auto attended = [&](const Tensor* t) {
    return std::any_of(out.attended_views.begin(), out.attended_views.end(),
                       [&](const StepGraph::AttendedView& a) { return a.view == t; });
  };
  const std::vector<Node>& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (op_is_view(n.op)) continue;  // no ranges of their own
    const bool patched = (n.op == OpKind::GET_ROWS && n.src[1] == inp_tokens) || n.op == OpKind::SET_ROWS ||
                         n.op == OpKind::FLASH_ATTN_EXT || std::any_of(n.src.begin(), n.src.end(), attended);
    if (patched) out.patched_ranges.push_back(static_cast<uint32_t>(i));
  }
}

float LayerRouting::margin(int64_t t) const {
  const int64_t n_expert = probs->ne[0], k = n_used();
  const float* p = probs->as<const float>() + t * n_expert;
  const int32_t* chosen = experts->as<const int32_t>() + t * k;
  float lowest_chosen = INFINITY, best_other = -INFINITY;
  for (int64_t e = 0; e < n_expert; ++e) {
    if (std::find(chosen, chosen + k, static_cast<int32_t>(e)) != chosen + k)
      lowest_chosen = std::min(lowest_chosen, p[e]);
    else
      best_other = std::max(best_other, p[e]);
  }
  return best_other == -INFINITY ? 0.0f : lowest_chosen - best_other;
}

bool update_step_graph(StepGraph& step, const Model& m, RunState& s, std::span<const int32_t> tokens) {
  if (static_cast<int64_t>(tokens.size()) != step.inp_tokens->ne[0]) return false;
  const int32_t pos0 = s.n_past;
  const int32_t n_kv = prepare_inputs(m.config, s, tokens);
  const int32_t kv_chunk = llamacpp_kv_split(s, static_cast<int64_t>(tokens.size()), n_kv).chunk;
  for (Node& n : step.graph.nodes()) {
    switch (n.op) {
      case OpKind::GET_ROWS:
        if (n.src[1] == step.inp_tokens) n.params.rows.assign(tokens.begin(), tokens.end());
        break;
      case OpKind::ROPE:
      case OpKind::SET_ROWS:
        n.params.pos0 = pos0;
        break;
      case OpKind::FLASH_ATTN_EXT:
        n.params.pos0 = pos0;
        n.params.n_kv = n_kv;
        n.params.kv_chunk = kv_chunk;
        break;
      default:
        break;
    }
  }
  for (const StepGraph::AttendedView& a : step.attended_views) a.view->ne[a.dim] = n_kv;
  return true;
}

}  // namespace tt
