#include "model/generate.h"

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace tt {

GenerateResult generate(Engine& engine, const GenerateOptions& options, GenerateObserver* observer,
                        const std::function<void(std::string_view)>& on_text) {
  const Tokenizer& tok = *engine.model().tokenizer;
  if (options.prompt_tokens.empty()) fail("the prompt has no tokens");
  if (options.n_predict < 0) fail("-n must be >= 0, got {}", options.n_predict);
  const int64_t needed = engine.n_past() + static_cast<int64_t>(options.prompt_tokens.size()) + options.n_predict;
  if (needed > engine.n_ctx())
    fail("context overflow: {} prompt tokens + {} to generate need {} positions, but the context holds {} (raise -c)",
         options.prompt_tokens.size(), options.n_predict, needed, engine.n_ctx());

  Sampler sampler(options.sampling);
  for (int32_t t : options.prompt_tokens) sampler.accept(t);
  GenerateResult result;
  std::vector<int32_t> input = options.prompt_tokens;
  for (int32_t step = 0; step <= options.n_predict; ++step) {
    if (options.stop && options.stop->load()) {
      result.interrupted = true;
      break;
    }
    StepOutcome out;
    out.step = step;
    out.phase = step == 0 ? Phase::PROMPT : Phase::GENERATE;
    out.pos_begin = engine.n_past();
    out.pos_end = out.pos_begin + static_cast<int32_t>(input.size());
    out.input_tokens = input;
    if (observer) observer->on_step_begin(step, out.phase, out.pos_begin, out.pos_end);
    out.start_ns = now_ns();
    out.logits = engine.eval(input, observer);
    out.end_ns = now_ns();
    out.hidden = engine.hidden();
    out.routing = engine.routing();
    // The last step's logits are only evaluated when a token is still to be chosen from them.
    const bool choose = static_cast<int32_t>(result.tokens.size()) < options.n_predict;
    if (choose) {
      out.sampled = sampler.sample(out.logits);
      out.end_of_generation = tok.is_eog(out.sampled.token);
    }
    if (observer) observer->on_step_end(out);
    ++result.steps;
    // The step as a user waits for it: evaluation, sampling and the observer's work (tracing costs count).
    (step == 0 ? result.prompt_ns : result.step_ns.emplace_back()) = now_ns() - out.start_ns;
    if (!choose) break;
    const int32_t next = out.sampled.token;
    result.tokens.push_back(next);
    sampler.accept(next);
    if (out.end_of_generation) {
      result.stopped_at_eog = true;
      break;
    }
    const std::string_view piece = tok.piece_view(next);
    result.text += piece;
    if (on_text) on_text(piece);
    if (static_cast<int32_t>(result.tokens.size()) == options.n_predict) break;
    input.assign(1, next);
  }
  return result;
}

}  // namespace tt
