// llama.cpp's reference outputs (shared/reference/greedy): prompts, token ids, logits, top-5 per step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quant/quant.h"

namespace tt::test {

struct GreedyCase {
  int index = 0;
  std::string prompt;
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> greedy_tokens;
  std::string greedy_bytes;  // from greedy_text_hex
  std::vector<float> first_logits;
  // top5[step] = 5 (id, logit) pairs, best first
  std::vector<std::vector<std::pair<int32_t, float>>> top5;
  std::string source;  // the greedy.json the record came from
  // MoE records: routing[step][layer] (step 0 the prompt pass, step s feeds greedy token s-1); per token of the
  // layer's feed-forward, llama.cpp's chosen experts (its order), their weights, and the router margin.
  struct LayerRouting {
    std::vector<std::vector<int32_t>> experts;
    std::vector<std::vector<float>> weights;
    std::vector<float> margin;
  };
  std::vector<std::vector<LayerRouting>> routing;
};

// Model names (file stems) that have greedy references; empty when shared/ is absent.
std::vector<std::string> greedy_models();
// The records of shared/reference/greedy/MODEL, where tests/data/llamacpp/MODEL has a record of the same index
// replaced by that one: llama.cpp's output recorded here by scripts/llamacpp-oracle for a shared record that
// llama.cpp itself does not reproduce (docs/engine.md, "Agreement with llama.cpp").
std::vector<GreedyCase> load_greedy_cases(const std::string& model);
// The records of one greedy.json file as they are, without replacements.
std::vector<GreedyCase> load_greedy_file(const std::string& path);
// The llama.cpp build that made MODEL's records (shared/reference/README.md): the MoE and qwen3 models' on an AMD
// AVX-512 CPU, the others' on an Intel AVX-512 CPU with FP16 (the engine reproduces either: quant.h).
LlamaCppBuild reference_build(const std::string& model);
// Models with replacement records in tests/data/llamacpp.
std::vector<std::string> replaced_greedy_models();

}  // namespace tt::test
