// The engine against llama.cpp on prompts of 64 tokens or more, where llama.cpp's flash attention takes its tiled
// path (docs/engine.md "Flash attention"): records made by scripts/llamacpp-oracle on this machine kind (llama.cpp
// itself, node-llama-cpp's prebuilt CPU libraries) into tests/data/llamacpp-long/MODEL, in the shared records'
// format. The shared records' prompts are all shorter than 64 tokens, so they never reach that path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "model/engine.h"
#include "sampling/sampler.h"
#include "support/paths.h"
#include "support/reference.h"

namespace tt {
namespace {

std::vector<std::string> long_prompt_models() {
  std::vector<std::string> models;
  const std::filesystem::path dir = test::repo_path("tests/data/llamacpp-long");
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.is_directory()) models.push_back(entry.path().filename());
  std::sort(models.begin(), models.end());
  return models;
}

class EngineLongPrompt : public ::testing::TestWithParam<std::string> {};

// Bit for bit, first-step logits and then teacher-forced over the recorded steps. The recordings ran llama.cpp's
// best variant without AMX for this CPU, an AVX-512 build without FP16: the kAmdAvx512 orders (quant.h).
TEST_P(EngineLongPrompt, MatchesLlamaCppBitForBit) {
  TT_REQUIRE_SHARED();
  const std::string model_name = GetParam();
  auto model = load_model(test::shared_path("models/" + model_name + ".gguf"));
  Engine engine(*model, {1024, 2, GgmlType::F16, LlamaCppBuild::kAmdAvx512});
  const auto cases = test::load_greedy_file(test::repo_path("tests/data/llamacpp-long/" + model_name + "/greedy.json"));
  ASSERT_FALSE(cases.empty());
  for (const test::GreedyCase& c : cases) {
    SCOPED_TRACE("prompt " + std::to_string(c.index) + " (" + std::to_string(c.prompt_tokens.size()) + " tokens)");
    ASSERT_GE(c.prompt_tokens.size(), 64u) << "not a long prompt: the record does not reach the tiled path";
    engine.reset();
    std::span<const float> logits = engine.eval(c.prompt_tokens);
    ASSERT_EQ(logits.size(), c.first_logits.size());
    float max_diff = 0;
    size_t differing = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      max_diff = std::max(max_diff, std::fabs(logits[i] - c.first_logits[i]));
      differing += logits[i] != c.first_logits[i];
    }
    std::printf("%s prompt %d: first-step logits max |diff| %.6g, %zu of %zu differ\n", model_name.c_str(), c.index,
                max_diff, differing, logits.size());
    EXPECT_EQ(differing, 0u) << "max |diff| " << max_diff;
    for (size_t step = 0; step < c.top5.size(); ++step) {
      if (step > 0) logits = engine.eval(std::span<const int32_t>(&c.greedy_tokens[step - 1], 1));
      for (const auto& [id, ref] : c.top5[step]) EXPECT_EQ(logits[id], ref) << "step " << step << " id " << id;
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Models, EngineLongPrompt, ::testing::ValuesIn(long_prompt_models()), param_name);

}  // namespace
}  // namespace tt
