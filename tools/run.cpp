// tensortrace run -m MODEL -p PROMPT [...]: generate text (llama.cpp's flag conventions).
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "model/generate.h"
#include "tokenizer/tokenizer.h"
#include "tools/command.h"

namespace tt::cli {
namespace {

struct RunArgs {
  std::string model;
  std::string prompt;
  std::string prompt_file;
  int32_t n_predict = 64;
  int threads = 0;
  int32_t ctx = 0;
  std::string kv_type = "f16";
  SamplingParams sampling;
};

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot read prompt file '{}'", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int run(const RunArgs& a) {
  if (a.prompt.empty() == a.prompt_file.empty()) fail("give exactly one of -p PROMPT or -f PROMPT_FILE");
  const std::string prompt = a.prompt_file.empty() ? a.prompt : read_text_file(a.prompt_file);
  const int threads = a.threads > 0 ? a.threads : std::max(1u, std::thread::hardware_concurrency());
  a.sampling.validate();
  std::optional<GgmlType> kv = type_from_name(a.kv_type);
  if (!kv || (*kv != GgmlType::F16 && *kv != GgmlType::F32))
    fail("--kv-type must be f16 or f32, got '{}'", a.kv_type);

  const uint64_t t_load0 = now_ns();
  fmt::print(stderr, "loading {} ...\n", a.model);
  std::unique_ptr<Model> model = load_model(a.model);
  Engine engine(*model, {a.ctx, threads, *kv});
  const uint64_t t_load1 = now_ns();

  GenerateOptions go;
  go.prompt_tokens = model->tokenizer->encode(prompt, /*add_special=*/true);
  go.n_predict = a.n_predict;
  go.sampling = a.sampling;
  fmt::print(stderr, "model: {} ({}, {} layers, dim {}), {} threads, context {}, prompt {} tokens\n",
             model->config.name, model->config.arch_name, model->config.n_layer, model->config.n_embd, threads,
             engine.n_ctx(), go.prompt_tokens.size());
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
  GenerateResult r = generate(engine, go, nullptr, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  uint64_t gen_ns = 0;
  for (uint64_t s : r.step_ns) gen_ns += s;
  const size_t n_gen_evals = r.step_ns.size();
  fmt::print(stderr, "load: {:.1f} ms\n", (t_load1 - t_load0) / 1e6);
  fmt::print(stderr, "prompt: {} tokens in {:.2f} ms ({:.1f} tokens/s)\n", go.prompt_tokens.size(), r.prompt_ns / 1e6,
             go.prompt_tokens.size() / (r.prompt_ns / 1e9));
  if (n_gen_evals > 0)
    fmt::print(stderr, "generation: {} tokens, {} steps in {:.2f} ms ({:.1f} tokens/s)\n", r.tokens.size(),
               n_gen_evals, gen_ns / 1e6, n_gen_evals / (gen_ns / 1e9));
  fmt::print(stderr, "memory beyond the model file: {:.2f} MiB (KV cache {:.2f} MiB)\n",
             engine.runtime_bytes() / 1048576.0, engine.kv_cache_bytes() / 1048576.0);
  return 0;
}

RegisterCommand reg("run", "Generate text from a prompt", 20, [](CLI::App& cmd) {
  auto a = std::make_shared<RunArgs>();
  cmd.add_option("-m,--model", a->model, "GGUF model file")->required();
  cmd.add_option("-p,--prompt", a->prompt, "Prompt text");
  cmd.add_option("-f,--file", a->prompt_file, "Read the prompt from a file");
  cmd.add_option("-n,--n-predict", a->n_predict, "Tokens to generate")->check(CLI::NonNegativeNumber);
  cmd.add_option("-t,--threads", a->threads, "Threads (default: all cores)")->check(CLI::Range(1, 1024));
  cmd.add_option("-c,--ctx-size", a->ctx, "Context size (default: the model's, at most 4096)")
      ->check(CLI::Range(1, 1 << 20));
  cmd.add_option("-s,--seed", a->sampling.seed, "Sampling seed");
  cmd.add_option("--temp", a->sampling.temperature, "Temperature (0: greedy)");
  cmd.add_option("--top-k", a->sampling.top_k, "Top-k (0: off)");
  cmd.add_option("--top-p", a->sampling.top_p, "Top-p (1: off)");
  cmd.add_option("--min-p", a->sampling.min_p, "Min-p (0: off)");
  cmd.add_option("--repeat-penalty", a->sampling.repeat_penalty, "Repetition penalty (1: off)");
  cmd.add_option("--repeat-last-n", a->sampling.repeat_last_n, "Tokens the repetition penalty looks back");
  cmd.add_option("--kv-type", a->kv_type, "KV cache type: f16 or f32");
  return [a]() { return run(*a); };
});

}  // namespace
}  // namespace tt::cli
