#include "model/config.h"

#include <fmt/format.h>

#include "core/error.h"

namespace tt {
namespace {

int32_t required_int(const GgufFile& f, const std::string& key) {
  std::optional<uint64_t> v = f.get_uint(key);
  if (!v) fail("{}: missing required metadata key '{}'", f.path(), key);
  if (*v == 0 || *v > (1u << 30)) fail("{}: metadata key '{}' = {} is out of range", f.path(), key, *v);
  return static_cast<int32_t>(*v);
}

}  // namespace

ModelConfig read_model_config(const GgufFile& f) {
  ModelConfig c;
  std::optional<std::string> arch = f.get_string("general.architecture");
  if (!arch) fail("{}: missing 'general.architecture'", f.path());
  c.arch_name = *arch;
  if (*arch == "llama") {
    c.arch = Architecture::LLAMA;
  } else if (*arch == "qwen2") {
    c.arch = Architecture::QWEN2;
    c.rope_neox = true;
  } else {
    fail("{}: architecture '{}' is not supported (supported: llama, qwen2)", f.path(), *arch);
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
  if (c.n_embd % c.n_head != 0)
    fail("{}: embedding length {} is not divisible by the head count {}", f.path(), c.n_embd, c.n_head);
  if (c.n_head % c.n_head_kv != 0)
    fail("{}: KV head count {} does not divide the head count {}", f.path(), c.n_head_kv, c.n_head);
  c.head_dim = c.n_embd / c.n_head;
  if (f.find(p + "attention.key_length")) {
    int32_t kl = required_int(f, p + "attention.key_length");
    if (kl != c.head_dim)
      fail("{}: attention.key_length {} differs from embedding_length / head_count = {} (not supported)", f.path(),
           kl, c.head_dim);
  }
  if (f.find(p + "rope.dimension_count")) {
    c.n_rot = required_int(f, p + "rope.dimension_count");
  } else {
    c.n_rot = c.head_dim;
    c.notes.push_back(fmt::format("{}rope.dimension_count absent: rotating the whole head ({})", p, c.head_dim));
  }
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0)
    fail("{}: rope dimension count {} must be even and at most the head dimension {}", f.path(), c.n_rot,
         c.head_dim);
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
  return c;
}

}  // namespace tt
