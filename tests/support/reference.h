// llama.cpp's reference outputs (shared/reference/greedy): prompts, token ids, logits, top-5 per step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
};

// Model names (file stems) that have greedy references; empty when shared/ is absent.
std::vector<std::string> greedy_models();
std::vector<GreedyCase> load_greedy_cases(const std::string& model);

}  // namespace tt::test
