#include "model/config.h"

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/memory_map.h"

namespace tt {
namespace {

int32_t required_int(const GgufFile& f, const std::string& key) {
  std::optional<uint64_t> v = f.get_uint(key);
  if (!v) fail("{}: missing required metadata key '{}'", f.path(), key);
  if (*v == 0 || *v > (1u << 30)) fail("{}: metadata key '{}' = {} is out of range", f.path(), key, *v);
  return static_cast<int32_t>(*v);
}

// The mixture-of-experts keys: absent expert_count means a dense feed-forward.
void read_expert_config(const GgufFile& f, const std::string& p, ModelConfig& c) {
  const std::optional<uint64_t> n_expert = f.get_uint(p + "expert_count");
  const bool moe_arch =
      c.arch == Architecture::QWEN2MOE || c.arch == Architecture::OLMOE || c.arch == Architecture::QWEN3MOE;
  if (!n_expert || *n_expert == 0) {
    if (moe_arch)
      fail("{}: missing required metadata key '{}expert_count' (a {} model has experts)", f.path(), p, c.arch_name);
    return;
  }
  c.n_expert = required_int(f, p + "expert_count");
  if (c.n_expert > kMaxExperts)
    fail("{}: metadata key '{}expert_count' = {} is above the {} experts a layer may have (llama.cpp's limit)",
         f.path(), p, c.n_expert, kMaxExperts);
  const std::optional<uint64_t> used = f.get_uint(p + "expert_used_count");
  if (!used) fail("{}: missing required metadata key '{}expert_used_count'", f.path(), p);
  if (*used == 0 || *used > static_cast<uint64_t>(c.n_expert))
    fail("{}: metadata key '{}expert_used_count' = {} must be between 1 and expert_count {}", f.path(), p, *used,
         c.n_expert);
  c.n_expert_used = static_cast<int32_t>(*used);
  c.n_ff_exp = f.find(p + "expert_feed_forward_length") ? required_int(f, p + "expert_feed_forward_length") : c.n_ff;
  if (f.find(p + "expert_shared_feed_forward_length"))
    c.n_ff_shexp = required_int(f, p + "expert_shared_feed_forward_length");
  else if (c.arch == Architecture::QWEN2MOE)
    fail("{}: missing required metadata key '{}expert_shared_feed_forward_length'", f.path(), p);
  if (std::optional<uint64_t> g = f.get_uint(p + "expert_gating_func")) {
    if (*g == 1)
      c.gating = ExpertGating::SOFTMAX;
    else if (*g == 2)
      c.gating = ExpertGating::SIGMOID;
    else
      fail("{}: metadata key '{}expert_gating_func' = {} is not supported (1 softmax, 2 sigmoid)", f.path(), p, *g);
  }
  if (f.find(p + "expert_weights_norm")) {
    std::optional<bool> norm = f.get_bool(p + "expert_weights_norm");
    if (!norm) fail("{}: metadata key '{}expert_weights_norm' must be a bool", f.path(), p);
    c.expert_weights_norm = *norm;
  }
  if (std::optional<double> scale = f.get_float(p + "expert_weights_scale")) {
    if (!(*scale > 0)) fail("{}: metadata key '{}expert_weights_scale' = {} must be positive", f.path(), p, *scale);
    if (*scale != 1.0) c.expert_weights_scale = static_cast<float>(*scale);
  }
}

}  // namespace

ModelConfig read_model_config(const GgufFile& f) {
  ModelConfig c;
  std::optional<std::string> arch = f.get_string("general.architecture");
  if (!arch) fail("{}: missing 'general.architecture'", f.path());
  c.arch_name = *arch;
  // llama.cpp's per-architecture graph choices: NeoX rotation, Q/K norms, renormalised expert weights.
  if (*arch == "llama") {
    c.arch = Architecture::LLAMA;
    c.expert_weights_norm = true;  // Mixtral layout
  } else if (*arch == "qwen2") {
    c.arch = Architecture::QWEN2;
    c.rope_neox = true;
  } else if (*arch == "qwen2moe") {
    c.arch = Architecture::QWEN2MOE;
    c.rope_neox = true;
  } else if (*arch == "olmoe") {
    c.arch = Architecture::OLMOE;
    c.rope_neox = true;
    c.qk_norm_whole = true;
  } else if (*arch == "qwen3") {
    c.arch = Architecture::QWEN3;
    c.rope_neox = true;
    c.qk_norm_per_head = true;
  } else if (*arch == "qwen3moe") {
    c.arch = Architecture::QWEN3MOE;
    c.rope_neox = true;
    c.qk_norm_per_head = true;
    c.expert_weights_norm = true;
  } else {
    fail("{}: architecture '{}' is not supported (supported: llama, qwen2, qwen2moe, olmoe, qwen3, qwen3moe)", f.path(),
         *arch);
  }
  c.name = f.get_string("general.name").value_or("");
  const std::string p = *arch + ".";
  c.n_embd = required_int(f, p + "embedding_length");
  c.n_layer = required_int(f, p + "block_count");
  c.n_ff = required_int(f, p + "feed_forward_length");
  c.n_head = required_int(f, p + "attention.head_count");
  c.n_ctx_train = f.get_uint(p + "context_length").has_value() ? required_int(f, p + "context_length") : 2048;
  if (f.find(p + "attention.head_count_kv")) {
    c.n_head_kv = required_int(f, p + "attention.head_count_kv");
  } else {
    c.n_head_kv = c.n_head;
    c.notes.push_back(fmt::format("{}attention.head_count_kv absent: using head_count {}", p, c.n_head));
  }
  // qwen3's heads are attention.key_length wide whatever the embedding width (Q is n_head x head_dim wide); the
  // other architectures split the embedding into the heads.
  const bool own_head_dim = c.arch == Architecture::QWEN3 || c.arch == Architecture::QWEN3MOE;
  if (own_head_dim && f.find(p + "attention.key_length")) {
    c.head_dim = required_int(f, p + "attention.key_length");
  } else {
    if (c.n_embd % c.n_head != 0)
      fail("{}: embedding length {} is not divisible by the head count {}", f.path(), c.n_embd, c.n_head);
    c.head_dim = c.n_embd / c.n_head;
    if (f.find(p + "attention.key_length")) {
      int32_t kl = required_int(f, p + "attention.key_length");
      if (kl != c.head_dim)
        fail("{}: attention.key_length {} differs from embedding_length / head_count = {} (not supported)", f.path(),
             kl, c.head_dim);
    }
  }
  if (c.n_head % c.n_head_kv != 0)
    fail("{}: KV head count {} does not divide the head count {}", f.path(), c.n_head_kv, c.n_head);
  if (f.find(p + "attention.value_length")) {
    int32_t vl = required_int(f, p + "attention.value_length");
    if (vl != c.head_dim)
      fail("{}: attention.value_length {} differs from the key length {} (not supported)", f.path(), vl, c.head_dim);
  }
  if (f.find(p + "rope.dimension_count")) {
    c.n_rot = required_int(f, p + "rope.dimension_count");
  } else {
    c.n_rot = c.head_dim;
    c.notes.push_back(fmt::format("{}rope.dimension_count absent: rotating the whole head ({})", p, c.head_dim));
  }
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0)
    fail("{}: rope dimension count {} must be even and at most the head dimension {}", f.path(), c.n_rot, c.head_dim);
  if (std::optional<double> base = f.get_float(p + "rope.freq_base")) {
    if (!(*base > 0)) fail("{}: rope.freq_base {} must be positive", f.path(), *base);
    c.rope_base = static_cast<float>(*base);
  } else {
    c.notes.push_back(fmt::format("{}rope.freq_base absent: default {}", p, c.rope_base));
  }
  if (std::optional<std::string> type = f.get_string(p + "rope.scaling.type")) {
    if (*type == "linear") {
      double factor = f.get_float(p + "rope.scaling.factor").value_or(1.0);
      if (!(factor > 0)) fail("{}: rope.scaling.factor {} must be positive", f.path(), factor);
      c.rope_freq_scale = static_cast<float>(1.0 / factor);
    } else if (*type != "none") {
      fail("{}: rope scaling type '{}' is not supported (none, linear)", f.path(), *type);
    }
  }
  if (std::optional<double> eps = f.get_float(p + "attention.layer_norm_rms_epsilon")) {
    if (!(*eps > 0 && *eps < 1)) fail("{}: layer_norm_rms_epsilon {} is out of range", f.path(), *eps);
    c.rms_eps = static_cast<float>(*eps);
  } else {
    c.notes.push_back(fmt::format("{}attention.layer_norm_rms_epsilon absent: default {}", p, c.rms_eps));
  }
  read_expert_config(f, p, c);
  return c;
}

}  // namespace tt
