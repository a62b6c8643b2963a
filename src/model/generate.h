// The generation loop: the prompt as one batch (step 0), then one token per step, sampled from the logits.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/ops.h"
#include "model/engine.h"
#include "sampling/sampler.h"

namespace tt {

struct GenerateOptions {
  std::vector<int32_t> prompt_tokens;
  int32_t n_predict = 64;  // tokens to generate (stops earlier at an end-of-generation token)
  SamplingParams sampling;
  // When set and true, no further step begins: the step in progress finishes and generate() returns (interrupted).
  const std::atomic<bool>* stop = nullptr;
};

// What one step did, handed to observers after it ran.
struct StepOutcome {
  int32_t step = 0;
  Phase phase = Phase::PROMPT;
  int32_t pos_begin = 0, pos_end = 0;  // positions the step evaluated
  std::span<const int32_t> input_tokens;
  std::span<const float> logits;      // of the last position
  std::span<const float> hidden;      // final normalised hidden state of the last position
  SampleResult sampled;               // the token chosen from these logits
  bool end_of_generation = false;     // the sampled token ends generation
  uint64_t start_ns = 0, end_ns = 0;  // eval time (graph build to logits)
  // Engine::routing(): the mixture-of-experts layers' routing (empty for dense models).
  std::span<const LayerRouting> routing;
};

class GenerateObserver : public StepObserver {
 public:
  virtual void on_step_begin(int32_t step, Phase phase, int32_t pos_begin, int32_t pos_end) {}
  virtual void on_step_end(const StepOutcome& outcome) {}
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (including a final end-of-generation token, if sampled)
  std::string text;             // their text (without the end-of-generation token)
  // Wall time of the prompt step and of each generation step: evaluation, sampling and the observer's work
  // (the trace's own step times cover evaluation only).
  uint64_t prompt_ns = 0;
  std::vector<uint64_t> step_ns;
  bool stopped_at_eog = false;
  bool interrupted = false;  // options.stop ended the run before it was done
  int32_t steps = 0;         // steps evaluated (the prompt step included)
};

// on_text receives each generated token's text as soon as it is chosen.
GenerateResult generate(Engine& engine, const GenerateOptions& options, GenerateObserver* observer,
                        const std::function<void(std::string_view)>& on_text);

}  // namespace tt
