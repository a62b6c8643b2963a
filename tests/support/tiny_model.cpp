#include "support/tiny_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "gguf/writer.h"
#include "quant/quant.h"

namespace tt::test {

std::vector<uint8_t> build_tiny_model(const TinyModelSpec& s) {
  GgufWriter w;
  const std::string a = s.arch;
  auto keep = [&](const std::string& key) {
    return std::find(s.omit_keys.begin(), s.omit_keys.end(), key) == s.omit_keys.end();
  };
  w.add_string("general.architecture", a);
  w.add_string("general.name", "tiny-" + a);
  const std::vector<std::pair<std::string, uint32_t>> hp = {
      {a + ".context_length", s.n_ctx},
      {a + ".embedding_length", s.n_embd},
      {a + ".block_count", s.n_layer},
      {a + ".feed_forward_length", s.n_ff},
      {a + ".attention.head_count", s.n_head},
      {a + ".attention.head_count_kv", s.n_head_kv},
      {a + ".rope.dimension_count", s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head}};
  std::vector<std::pair<std::string, uint32_t>> keys = hp;
  if (s.head_dim > 0)
    keys.insert(keys.end(), {{a + ".attention.key_length", s.head_dim}, {a + ".attention.value_length", s.head_dim}});
  if (s.n_expert > 0)
    keys.insert(keys.end(), {{a + ".expert_count", s.n_expert}, {a + ".expert_used_count", s.n_expert_used}});
  for (const auto& [k, v] : keys) {
    bool overridden = false;
    for (const auto& [ek, ev] : s.extra_u32) overridden |= ek == k;
    if (keep(k) && !overridden) w.add_u32(k, v);
  }
  for (const auto& [k, v] : s.extra_u32) w.add_u32(k, v);
  if (keep(a + ".attention.layer_norm_rms_epsilon")) w.add_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);

  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(fmt::format("<0x{:02X}>", b));
    scores.push_back(0);
    types.push_back(6);
  }
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_f32_array("tokenizer.ggml.scores", scores);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
  w.add_u32("tokenizer.ggml.unknown_token_id", 0);

  std::mt19937 rng(s.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t D = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  const int64_t E = s.n_embd, Q = D * s.n_head, KV = D * s.n_head_kv, F = s.n_ff, V = kTinyVocab, NE = s.n_expert;
  auto add = [&](std::string name, std::vector<int64_t> dims, bool matrix, float scale, float offset = 0.0f) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<float> values(n);
    for (float& v : values) v = offset + scale * normal(rng);
    if (s.edit_tensor) s.edit_tensor(name, dims, values);
    if (name.empty()) return;
    GgmlType type = matrix ? s.matrix_type : GgmlType::F32;
    for (const auto& [tn, tt] : s.type_override)
      if (tn == name) type = tt;
    n = 1;
    for (int64_t d : dims) n *= d;
    values.resize(n);
    if (type == GgmlType::F32) {
      w.add_tensor_f32(name, dims, values);
      return;
    }
    const QuantKernels* k = find_kernels(type);
    std::vector<uint8_t> bytes(row_bytes(type, dims[0]) * (n / dims[0]));
    if (!k || !k->quantize_row) {
      w.add_tensor(name, type, dims, bytes);
      return;
    }
    for (int64_t r = 0; r < n / dims[0]; ++r)
      k->quantize_row(values.data() + r * dims[0], bytes.data() + r * row_bytes(type, dims[0]), dims[0]);
    w.add_tensor(name, type, dims, bytes);
  };
  const float ws = 1.0f / std::sqrt(static_cast<float>(E));
  add("token_embd.weight", {E, V}, true, 1.0f);
  add("output_norm.weight", {E}, false, 0.1f, 1.0f);
  if (!s.tied_output) add("output.weight", {E, V}, true, ws);
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string p = fmt::format("blk.{}.", il);
    add(p + "attn_norm.weight", {E}, false, 0.1f, 1.0f);
    add(p + "attn_q.weight", {E, Q}, true, ws);
    add(p + "attn_k.weight", {E, KV}, true, ws);
    add(p + "attn_v.weight", {E, KV}, true, ws);
    add(p + "attn_output.weight", {Q, E}, true, ws);
    if (a == "qwen3" || a == "qwen3moe") {
      add(p + "attn_q_norm.weight", {D}, false, 0.1f, 1.0f);
      add(p + "attn_k_norm.weight", {D}, false, 0.1f, 1.0f);
    } else if (a == "olmoe") {
      add(p + "attn_q_norm.weight", {Q}, false, 0.1f, 1.0f);
      add(p + "attn_k_norm.weight", {KV}, false, 0.1f, 1.0f);
    }
    if (a == "qwen2") {
      add(p + "attn_q.bias", {E}, false, 0.1f);
      add(p + "attn_k.bias", {KV}, false, 0.1f);
      add(p + "attn_v.bias", {KV}, false, 0.1f);
    }
    add(p + "ffn_norm.weight", {E}, false, 0.1f, 1.0f);
    if (NE > 0) {
      add(p + "ffn_gate_inp.weight", {E, NE}, false, ws);
      add(p + "ffn_gate_exps.weight", {E, F, NE}, true, ws);
      add(p + "ffn_up_exps.weight", {E, F, NE}, true, ws);
      add(p + "ffn_down_exps.weight", {F, E, NE}, true, 1.0f / std::sqrt(static_cast<float>(F)));
      continue;
    }
    add(p + "ffn_gate.weight", {E, F}, true, ws);
    add(p + "ffn_up.weight", {E, F}, true, ws);
    add(p + "ffn_down.weight", {F, E}, true, 1.0f / std::sqrt(static_cast<float>(F)));
  }
  return w.bytes();
}

void write_tiny_model(const TinyModelSpec& spec, const std::string& path) {
  std::vector<uint8_t> b = build_tiny_model(spec);
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + path);
  std::fwrite(b.data(), 1, b.size(), f);
  std::fclose(f);
}

}  // namespace tt::test
