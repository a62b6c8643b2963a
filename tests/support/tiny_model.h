// Builds small llama/qwen2/qwen3/olmoe GGUF models (with experts when asked) in memory for tests: random weights, a
// byte-level SentencePiece vocabulary
// (<unk>, <s>, </s> and the 256 byte tokens), hooks to corrupt shapes, drop tensors, change types or values.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"

namespace tt::test {

struct TinyModelSpec {
  std::string arch = "llama";
  int n_layer = 2, n_embd = 32, n_head = 4, n_head_kv = 2, n_ff = 64;
  int n_ctx = 128;
  int head_dim = 0;                      // qwen3/qwen3moe: attention.key_length (0: n_embd / n_head, no key written)
  int n_expert = 0, n_expert_used = 0;   // > 0: experts (expert_count, expert_used_count) of n_ff each
  GgmlType matrix_type = GgmlType::F32;  // type of the 2-D weights (needs a reference quantizer)
  bool tied_output = false;
  uint32_t seed = 1;
  // Called for every tensor before writing: may change its name (empty drops it), dims or values (F32).
  std::function<void(std::string& name, std::vector<int64_t>& dims, std::vector<float>& values)> edit_tensor;
  // Extra or overriding metadata keys (u32 values).
  std::vector<std::pair<std::string, uint32_t>> extra_u32;
  std::vector<std::string> omit_keys;
  // Per-tensor type overrides; types without a reference quantizer get zero bytes of the right size.
  std::vector<std::pair<std::string, GgmlType>> type_override;
};

constexpr int kTinyVocab = 259;

std::vector<uint8_t> build_tiny_model(const TinyModelSpec& spec);
// Writes it to `path` (for APIs that open files).
void write_tiny_model(const TinyModelSpec& spec, const std::string& path);

}  // namespace tt::test
