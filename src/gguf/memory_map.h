// The model file's memory map: where every tensor's bytes are, what it is (layer, category, component).
// Shared by `inspect --json`, the run directory's memory-map.json, exporters, analysis and the viewer.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "gguf/gguf.h"

namespace tt {

struct TensorRole {
  std::optional<int> layer;  // from "blk.N."; nullopt for global tensors
  std::string category;      // embedding, attention, ffn, norm, output, other
  std::string component;     // q, k, v, o, gate, up, down, norm, q_bias, ..., embedding, output
};

// Role of a tensor from its GGUF name (llama.cpp's naming: token_embd, blk.N.attn_q, ...).
TensorRole tensor_role(std::string_view name);

// The most experts a layer may have: llama.cpp's LLAMA_MAX_EXPERTS, so a model llama.cpp cannot load is refused
// here too, and every per-(layer, expert) table a run's reader builds stays bounded whatever a file claims.
inline constexpr int64_t kMaxExperts = 512;

// Expert e of a 3-D expert tensor (llama.cpp's ffn_*_exps, [ne0, ne1, n_expert]) is the contiguous slab of ne1 rows
// starting at e x bytes_per_expert from the tensor's start.
struct ExpertSlabs {
  int64_t count = 0;
  uint64_t bytes_per_expert = 0;
  uint64_t begin(int64_t e) const { return first + static_cast<uint64_t>(e) * bytes_per_expert; }
  uint64_t first = 0;  // absolute file offset of expert 0
};
// The slabs of an expert tensor, nullopt for other tensors (not 3-D, or not named *_exps); throws tt::Error for more
// than kMaxExperts.
std::optional<ExpertSlabs> expert_slabs(const GgufTensorInfo& t);

// The documented memory-map JSON (docs/memory-map.md).
nlohmann::json memory_map_json(const GgufFile& file);

}  // namespace tt
