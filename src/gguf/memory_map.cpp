#include "gguf/memory_map.h"

#include <charconv>
#include <filesystem>

#include "core/error.h"

namespace tt {
namespace {

struct ComponentRule {
  std::string_view suffix;  // after "blk.N." or the whole name for global tensors, without ".weight"/".bias"
  std::string_view category;
  std::string_view component;
};

// One table: GGUF tensor base names to category and component.
constexpr ComponentRule kRules[] = {
    {"token_embd", "embedding", "embedding"},
    {"token_embd_norm", "norm", "norm"},
    {"output_norm", "norm", "norm"},
    {"output", "output", "output"},
    {"rope_freqs", "attention", "rope_freqs"},
    {"attn_norm", "norm", "norm"},
    {"attn_q", "attention", "q"},
    {"attn_k", "attention", "k"},
    {"attn_v", "attention", "v"},
    {"attn_qkv", "attention", "qkv"},
    {"attn_output", "attention", "o"},
    {"attn_q_norm", "norm", "q_norm"},
    {"attn_k_norm", "norm", "k_norm"},
    {"attn_rot_embd", "attention", "rope_freqs"},
    {"ffn_norm", "norm", "norm"},
    {"ffn_gate", "ffn", "gate"},
    {"ffn_up", "ffn", "up"},
    {"ffn_down", "ffn", "down"},
    {"ffn_gate_inp", "ffn", "router"},
    {"ffn_gate_exps", "ffn", "gate_exps"},
    {"ffn_up_exps", "ffn", "up_exps"},
    {"ffn_down_exps", "ffn", "down_exps"},
    {"ffn_gate_inp_shexp", "ffn", "shexp_gate_inp"},
    {"ffn_gate_shexp", "ffn", "gate_shexp"},
    {"ffn_up_shexp", "ffn", "up_shexp"},
    {"ffn_down_shexp", "ffn", "down_shexp"},
    {"post_attention_norm", "norm", "norm"},
    {"post_ffw_norm", "norm", "norm"},
};

}  // namespace

TensorRole tensor_role(std::string_view name) {
  TensorRole role;
  std::string_view base = name;
  if (base.starts_with("blk.")) {
    std::string_view rest = base.substr(4);
    size_t dot = rest.find('.');
    int layer = 0;
    if (dot != std::string_view::npos) {
      auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + dot, layer);
      if (ec == std::errc() && ptr == rest.data() + dot) {
        role.layer = layer;
        base = rest.substr(dot + 1);
      }
    }
  }
  bool bias = false;
  if (base.ends_with(".weight")) {
    base.remove_suffix(7);
  } else if (base.ends_with(".bias")) {
    base.remove_suffix(5);
    bias = true;
  }
  role.category = "other";
  role.component = std::string(base);
  for (const ComponentRule& r : kRules) {
    if (r.suffix == base) {
      role.category = r.category;
      role.component = std::string(r.component) + (bias ? "_bias" : "");
      break;
    }
  }
  return role;
}

std::optional<ExpertSlabs> expert_slabs(const GgufTensorInfo& t) {
  if (t.ne[2] <= 1 || t.ne[3] != 1 || !tensor_role(t.name).component.ends_with("_exps")) return std::nullopt;
  if (t.ne[2] > kMaxExperts)
    fail("{}: {} experts, above the {} a layer may have (llama.cpp's limit)", t.name, t.ne[2], kMaxExperts);
  return ExpertSlabs{t.ne[2], t.size_bytes / static_cast<uint64_t>(t.ne[2]), t.offset};
}

nlohmann::json memory_map_json(const GgufFile& file) {
  using nlohmann::json;
  json tensors = json::array();
  for (const GgufTensorInfo& t : file.tensors()) {
    TensorRole role = tensor_role(t.name);
    tensors.push_back({
        {"name", t.name},
        {"type", type_name(t.type)},
        {"shape", t.shape()},
        {"offset_start", t.offset},
        {"offset_end", t.offset_end()},
        {"size_bytes", t.size_bytes},
        {"layer", role.layer ? json(*role.layer) : json(nullptr)},
        {"category", role.category},
        {"component", role.component},
    });
    if (std::optional<ExpertSlabs> x = expert_slabs(t)) {
      json ranges = json::array();
      for (int64_t e = 0; e < x->count; ++e) ranges.push_back({x->begin(e), x->begin(e) + x->bytes_per_expert});
      tensors.back()["experts"] = {{"count", x->count}, {"bytes_per_expert", x->bytes_per_expert}, {"ranges", ranges}};
    }
  }
  std::string name = file.get_string("general.name").value_or("");
  return {
      {"format", "tensortrace.memory-map"},
      {"version", 1},
      {"file", std::filesystem::path(file.path()).filename().string()},
      {"model_name", name},
      {"architecture", file.get_string("general.architecture").value_or("")},
      {"file_size", file.file_size()},
      {"gguf_version", file.version()},
      {"alignment", file.alignment()},
      {"data_offset", file.data_offset()},
      {"sections",
       {{"header", {0, file.header_end()}},
        {"metadata", {file.header_end(), file.kv_end()}},
        {"tensor_info", {file.kv_end(), file.tensor_info_end()}},
        {"data", {file.data_offset(), file.file_size()}}}},
      {"tensors", tensors},
  };
}

}  // namespace tt
