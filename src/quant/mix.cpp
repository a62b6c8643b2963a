#include "quant/mix.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

#include "core/error.h"

namespace tt {
namespace {

using G = GgmlType;

// llama_ftype values (llama.h).
constexpr QuantFileType kFileTypes[] = {
    {"F16", 1, G::F16},        {"BF16", 32, G::BF16},     {"Q8_0", 7, G::Q8_0},    {"Q4_0", 2, G::Q4_0},
    {"Q4_1", 3, G::Q4_1},      {"Q5_0", 8, G::Q5_0},      {"Q5_1", 9, G::Q5_1},    {"Q2_K", 10, G::Q2_K},
    {"Q3_K_M", 12, G::Q3_K},   {"Q4_K_M", 15, G::Q4_K},   {"Q5_K_M", 17, G::Q5_K}, {"Q6_K", 18, G::Q6_K},
    {"IQ4_NL", 25, G::IQ4_NL}, {"IQ4_XS", 30, G::IQ4_XS},
};

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::toupper(static_cast<unsigned char>(x)) == std::toupper(static_cast<unsigned char>(y));
         });
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// The N of a name starting "blk.N." (sscanf's %d: optional sign, digits), or nullopt.
std::optional<int64_t> layer_of(const std::string& name) {
  constexpr std::string_view kPrefix = "blk.";
  if (name.rfind(kPrefix, 0) != 0) return std::nullopt;
  const char* begin = name.data() + kPrefix.size();
  const char* end = name.data() + name.size();
  int64_t layer = 0;
  const auto [ptr, ec] = std::from_chars(begin + (begin < end && *begin == '+'), end, layer);
  if (ec != std::errc() || ptr == end || *ptr != '.') return std::nullopt;
  return layer;
}

enum class Category {
  kTokenEmbd,
  kAttnQ,
  kAttnV,
  kAttnK,
  kAttnQkv,
  kAttnKvB,
  kAttnOutput,
  kFfnUp,
  kFfnGate,
  kFfnDown,
  kOutput,
  kOther
};

Category category_of(const std::string& name) {
  if (name == "output.weight") return Category::kOutput;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Category::kTokenEmbd;
  if (contains(name, "attn_qkv.weight")) return Category::kAttnQkv;
  if (contains(name, "attn_kv_b.weight")) return Category::kAttnKvB;
  if (contains(name, "attn_v.weight")) return Category::kAttnV;
  if (contains(name, "attn_k.weight")) return Category::kAttnK;
  if (contains(name, "attn_q.weight")) return Category::kAttnQ;
  if (contains(name, "attn_output.weight")) return Category::kAttnOutput;
  if (contains(name, "ffn_up")) return Category::kFfnUp;
  if (contains(name, "ffn_gate")) return Category::kFfnGate;
  if (contains(name, "ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}

bool is_attn_v(Category c) { return c == Category::kAttnV || c == Category::kAttnQkv || c == Category::kAttnKvB; }

// tensor_allows_quantization for the architectures a GGUF of this engine's kind holds: 2-D and 3-D weights,
// not norms, routers or position / token-type embeddings.
bool allows_quantization(const MixTensor& t) {
  if (t.n_dims < 2) return false;
  const std::string& n = t.name;
  if (n.size() < 6 || n.compare(n.size() - 6, 6, "weight") != 0) return false;
  for (std::string_view part : {"_norm.weight",
                                "ffn_gate_inp.weight",
                                "ffn_gate_tid2eid.weight",
                                "altup",
                                "laurel",
                                "per_layer_model_proj",
                                "ssm_conv1d",
                                "shortconv.conv.weight",
                                "indexer.k_proj.weight",
                                "indexer.q_proj.weight",
                                "time_mix_",
                                "attn_rel_b.weight",
                                ".position_embd",
                                "sam.pos_embd",
                                "sam.neck.",
                                "sam.net_",
                                ".rel_pos",
                                ".patch_embd",
                                ".patch_merger",
                                "a.rvq.codebook",
                                "mm.a.code_embd"})
    if (contains(n, part)) return false;
  return n != "position_embd.weight" && n != "token_types.weight";
}

// Layers at the start, the end and every third in between get more bits.
bool use_more_bits(int64_t i_layer, int64_t n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// Rows of a type with blocks longer than the row: llama-quantize's fallbacks.
G fallback(G type, const MixTensor& t) {
  const int64_t ncols = t.ne[0];
  if (ncols % type_traits(type).block_size == 0) return type;
  G to;
  switch (type) {
    case G::IQ4_XS:
      to = G::IQ4_NL;
      break;
    case G::Q2_K:
    case G::Q3_K:
      to = G::Q4_0;
      break;
    case G::Q4_K:
      to = G::Q5_0;
      break;
    case G::Q5_K:
      to = G::Q5_1;
      break;
    case G::Q6_K:
      to = G::Q8_0;
      break;
    default:  // llama-quantize refuses these too
      fail("tensor '{}': rows of {} elements are not whole {} blocks and {} has no fallback type", t.name, ncols,
           type_name(type), type_name(type));
  }
  return ncols % type_traits(to).block_size == 0 ? to : G::F16;
}

struct MixState {
  const QuantFileType& target;
  const MixModel& model;
  bool tied_embeddings = true;
  int64_t n_attention_wv = 0, i_attention_wv = 0;
  int64_t i_ffn_down = 0, i_ffn_gate = 0, i_ffn_up = 0;

  int64_t n_gqa() const { return model.n_head_kv == 0 ? 0 : model.n_head / model.n_head_kv; }
  bool is(uint32_t ftype) const { return target.file_type == ftype; }

  // The layer of an ffn tensor: the running count, or in MoE models the name's (experts may be split).
  int64_t layer(int64_t counter, const std::string& name) const {
    if (model.n_expert <= 1) return counter;
    const std::optional<int64_t> l = layer_of(name);
    if (!l) fail("cannot determine the layer of tensor '{}'", name);
    if (*l < 0 || *l >= model.n_layer) fail("tensor '{}' has layer {}, outside [0, {})", name, *l, model.n_layer);
    return *l;
  }

  G choose(G t, const MixTensor& tensor, Category c);
};

// llama_ftype values the rules name.
constexpr uint32_t kQ2_K = 10, kQ3_K_M = 12, kQ4_K_M = 15, kQ5_K_M = 17, kIQ4_NL = 25, kIQ4_XS = 30;

// llama_tensor_get_type_impl for the file types of kFileTypes.
G MixState::choose(G t, const MixTensor& tensor, Category c) {
  const std::string& name = tensor.name;
  const bool falcon = model.arch == "falcon";
  const int64_t n_layer = model.n_layer;
  if (c == Category::kOutput || (tied_embeddings && c == Category::kTokenEmbd)) {
    if (falcon || tensor.ne[0] % type_traits(t).block_size != 0) return G::Q8_0;
    return t != G::Q8_0 ? G::Q6_K : t;
  }
  if (c == Category::kTokenEmbd) return t;
  if (is_attn_v(c)) {
    if (is(kQ2_K))
      t = n_gqa() >= 4 ? G::Q4_K : G::Q3_K;
    else if (is(kQ3_K_M))
      t = i_attention_wv < 2 ? G::Q5_K : G::Q4_K;
    else if ((is(kIQ4_NL) || is(kIQ4_XS)) && n_gqa() >= 4)
      t = G::Q5_K;
    else if ((is(kQ4_K_M) || is(kQ5_K_M)) && use_more_bits(i_attention_wv, n_attention_wv))
      t = G::Q6_K;
    // Llama 2 70B: 8 heads share each attn_v.
    if (model.arch == "llama" && n_layer == 80 && model.n_head != model.n_head_kv && (t == G::Q3_K || t == G::Q4_K))
      t = G::Q5_K;
    if (model.n_expert == 8) t = G::Q8_0;
    ++i_attention_wv;
  } else if (c == Category::kAttnK) {
    if (model.n_expert == 8) t = G::Q8_0;
  } else if (c == Category::kFfnDown) {
    const int64_t i_layer = layer(i_ffn_down, name);
    if (is(kQ2_K))
      t = G::Q3_K;
    else if (is(kQ3_K_M))
      t = i_layer < n_layer / 16 ? G::Q5_K : !falcon || use_more_bits(i_layer, n_layer) ? G::Q4_K : G::Q3_K;
    else if (is(kQ4_K_M)) {
      if (falcon)
        t = i_layer < n_layer / 16 ? G::Q6_K : use_more_bits(i_layer, n_layer) ? G::Q5_K : G::Q4_K;
      else if (use_more_bits(i_layer, n_layer))
        t = G::Q6_K;
    } else if (i_layer < n_layer / 8 && (is(kIQ4_NL) || is(kIQ4_XS)))
      t = G::Q5_K;
    else if (is(kQ5_K_M) && use_more_bits(i_layer, n_layer))
      t = G::Q6_K;
    ++i_ffn_down;
  } else if (c == Category::kAttnOutput) {
    if (!falcon) {
      if (model.n_expert == 8) {
        if (is(kQ2_K) || is(kQ3_K_M) || is(kIQ4_NL) || is(kQ4_K_M) || is(kIQ4_XS)) t = G::Q5_K;
      } else {
        if (is(kQ2_K))
          t = G::Q3_K;
        else if (is(kQ3_K_M))
          t = G::Q4_K;
      }
    }
  } else if (c == Category::kAttnQkv) {
    if (is(kQ3_K_M))
      t = G::Q4_K;
    else if (is(kQ4_K_M))
      t = G::Q5_K;
    else if (is(kQ5_K_M))
      t = G::Q6_K;
  } else if (c == Category::kFfnGate) {
    layer(i_ffn_gate, name);  // checks the name's layer in MoE models, as llama-quantize does
    ++i_ffn_gate;
  } else if (c == Category::kFfnUp) {
    layer(i_ffn_up, name);
    ++i_ffn_up;
  }
  return t;
}

}  // namespace

const QuantFileType* find_quant_file_type(std::string_view name) {
  for (const QuantFileType& t : kFileTypes)
    if (equal_ignoring_case(t.name, name)) return &t;
  return nullptr;
}

std::string quant_file_type_names() {
  std::string out;
  for (const QuantFileType& t : kFileTypes) out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

std::vector<size_t> quantize_order(const std::vector<std::string>& names) {
  std::vector<size_t> order(names.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int64_t la = layer_of(names[a]).value_or(-1), lb = layer_of(names[b]).value_or(-1);
    return la != lb ? la < lb : names[a] < names[b];
  });
  return order;
}

std::vector<GgmlType> choose_tensor_types(const QuantFileType& target, const MixModel& model,
                                          const std::vector<MixTensor>& tensors) {
  MixState state{target, model};
  for (const MixTensor& t : tensors) {
    const Category c = category_of(t.name);
    if (is_attn_v(c)) ++state.n_attention_wv;
    if (c == Category::kOutput) state.tied_embeddings = false;
  }
  const bool quantized = type_traits(target.default_type).quantized;
  std::vector<GgmlType> out;
  out.reserve(tensors.size());
  for (const MixTensor& t : tensors) {
    if (!allows_quantization(t)) {
      out.push_back(t.type);
      continue;
    }
    G type = target.default_type;
    if (quantized) type = fallback(state.choose(type, t, category_of(t.name)), t);
    out.push_back(type);
  }
  return out;
}

}  // namespace tt
