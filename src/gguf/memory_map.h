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
  std::optional<int> layer;   // from "blk.N."; nullopt for global tensors
  std::string category;       // embedding, attention, ffn, norm, output, other
  std::string component;      // q, k, v, o, gate, up, down, norm, q_bias, ..., embedding, output
};

// Role of a tensor from its GGUF name (llama.cpp's naming: token_embd, blk.N.attn_q, ...).
TensorRole tensor_role(std::string_view name);

// The documented memory-map JSON (docs/memory-map.md).
nlohmann::json memory_map_json(const GgufFile& file);

}  // namespace tt
